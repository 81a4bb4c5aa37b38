import type { TenantSnapshot } from '../../core/snapshot.js'
import type {
  CommitResult,
  DurablePayload,
  HotStore,
  InvalidationListener,
  KeyRef,
  QueuedReceipts,
  ReceiptQueue,
} from '../ports/hot-store.js'
import { createCommitBatcher } from './commit-batcher.js'
import type { RedisClient } from './connect.js'
import { COMMIT, PUBLISH, RELEASE } from './hot-store-scripts.js'

/** Quota counters outlive their month by a few days, then expire on their own. */
const QUOTA_TTL_SECONDS = 40 * 86400
/** Consumption markers outlive their grant's expiry by this much. */
const GRANT_MARKER_GRACE_SECONDS = 300
const GROUP = 'drain'
/** Drain hints per tenant are sent at most this often by one process. */
const HINT_INTERVAL_MS = 50
/** Commits per script call at most (each is a few Redis commands; Redis serves no one else meanwhile). */
const MAX_COMMIT_BATCH = 64

type Commands = RedisClient & {
  wgPublish(ver: string, snap: string, version: number, json: string, ...over: number[]): Promise<number>
  wgCommit(numKeys: number, ...args: (string | number)[]): Promise<string[][]>
  wgRelease(q: string, g: string, hasQuota: string, hasGrant: string): Promise<number>
}

export interface RedisHotStoreOptions {
  /** Command connection (fail-fast: no offline queue). */
  redis: RedisClient
  /** A dedicated connection for SUBSCRIBE (a subscribed connection can run nothing else). */
  subscriber: RedisClient
  keyPrefix: string
  nowSeconds: () => number
  /** Entries a consumer held this long without acknowledging are claimed by another drainer. */
  claimIdleMs?: number
}

/**
 * Redis hot store: per-tenant snapshots keyed by version, invalidation by pub/sub on every
 * bump, and the commit as one Lua script. Keys are hash-tagged per tenant (Redis Cluster).
 */
export function createRedisHotStore(opts: RedisHotStoreOptions): HotStore {
  const r = opts.redis as Commands
  r.defineCommand('wgPublish', { numberOfKeys: 2, lua: PUBLISH })
  r.defineCommand('wgCommit', { lua: COMMIT })
  r.defineCommand('wgRelease', { numberOfKeys: 2, lua: RELEASE })
  const p = opts.keyPrefix
  const tag = (tenantId: string) => `${p}{${tenantId}}`
  const k = {
    ver: (t: string) => `${tag(t)}:ver`,
    snap: (t: string) => `${tag(t)}:snap`,
    quota: (t: string, keyId: string, period: string) => `${tag(t)}:q:${keyId}:${period}`,
    noQuota: (t: string) => `${tag(t)}:q:-`,
    grant: (t: string, grantId: string) => `${tag(t)}:gc:${grantId}`,
    noGrant: (t: string) => `${tag(t)}:gc:-`,
    stream: (t: string) => `${tag(t)}:rq`,
    /** The tenant's invalidation channel: a shard channel in the tenant's slot. */
    invalidations: (t: string) => `${tag(t)}:inv`,
    keyIndex: (hash: string) => `${p}key:{${hash}}`,
    dirty: `${p}dirty`,
  }
  /** A tenant's fixed keys, built once: every commit names three of them. */
  interface TenantKeys {
    ver: string
    noQuota: string
    stream: string
    /** The last quota key built, which the next commit for the same key and month reuses. */
    quota: { keyId: string; period: string; key: string } | null
  }
  const tenantKeys = new Map<string, TenantKeys>()
  const keysOf = (t: string): TenantKeys => {
    let tk = tenantKeys.get(t)
    if (!tk) {
      tk = { ver: k.ver(t), noQuota: k.noQuota(t), stream: k.stream(t), quota: null }
      tenantKeys.set(t, tk)
    }
    return tk
  }
  const quotaKey = (t: string, tk: TenantKeys, keyId: string, period: string): string => {
    const q = tk.quota
    if (q && q.keyId === keyId && q.period === period) return q.key
    tk.quota = { keyId, period, key: k.quota(t, keyId, period) }
    return tk.quota.key
  }
  /** Drain hints go to the control planes alone, on one classic channel. */
  const queuedChannel = `${p}queued`
  /** Per tenant followed: its channel and listeners. A channel is subscribed while it has one. */
  const followed = new Map<string, { channel: string; listeners: Set<InvalidationListener>; live: boolean }>()
  const byChannel = new Map<string, string>()
  const queuedListeners = new Set<() => void>()
  const groupsMade = new Set<string>()
  const hinted = new Map<string, number>()
  const batcher = createCommitBatcher(
    (keys, args) => r.wgCommit(keys.length, ...keys, ...args),
    MAX_COMMIT_BATCH,
  )

  opts.subscriber.on('smessage', (channel: string, message: string) => {
    const tenantId = byChannel.get(channel)
    const f = tenantId === undefined ? undefined : followed.get(tenantId)
    const version = Number(message)
    if (f && Number.isFinite(version)) for (const l of f.listeners) l(version)
  })
  opts.subscriber.on('message', (channel: string) => {
    if (channel === queuedChannel) for (const l of queuedListeners) l()
  })
  // Subscribing is best-effort: invalidation only speeds refreshes up; the commit's version
  // check is what keeps decisions correct. One that failed while Redis was away is retried
  // when it comes back. Sent only on a ready connection: ioredis writes a (S)SUBSCRIBE at once
  // while its ready check is pending, the check's INFO then fails on the subscribed connection,
  // which closes, and the channel was lost for good (found in review: a proxy that followed its
  // tenant while connecting heard no invalidation for its whole life). Every 'ready', a
  // reconnect's too, subscribes each followed channel again (idempotent).
  const ready = () => opts.subscriber.status === 'ready'
  const ssubscribe = (f: { channel: string; live: boolean }) => {
    if (f.live || !ready()) return
    f.live = true
    opts.subscriber.ssubscribe(f.channel).catch(() => {
      f.live = false
    })
  }
  let queuedSubscribed = false
  const subscribeQueued = () => {
    if (queuedSubscribed || !ready()) return
    queuedSubscribed = true
    opts.subscriber.subscribe(queuedChannel).catch(() => {
      queuedSubscribed = false
    })
  }
  opts.subscriber.on('ready', () => {
    for (const f of followed.values()) {
      f.live = false
      ssubscribe(f)
    }
    queuedSubscribed = false
    if (queuedListeners.size > 0) subscribeQueued()
  })

  async function ensureGroup(tenantId: string): Promise<void> {
    if (groupsMade.has(tenantId)) return
    try {
      await r.xgroup('CREATE', k.stream(tenantId), GROUP, '0', 'MKSTREAM')
    } catch (err) {
      if (!String((err as Error).message).includes('BUSYGROUP')) throw err
    }
    groupsMade.add(tenantId)
  }

  async function readQueued(tenantId: string, consumer: string, count: number): Promise<QueuedReceipts[]> {
    // A sweep visits every tenant: never create streams (and groups) for tenants without one.
    if (!groupsMade.has(tenantId) && (await r.exists(k.stream(tenantId))) === 0) return []
    await ensureGroup(tenantId)
    // First anything a crashed drainer left unacknowledged, then new entries.
    const claimed = (await r.xautoclaim(
      k.stream(tenantId),
      GROUP,
      consumer,
      opts.claimIdleMs ?? 15_000,
      '0',
      'COUNT',
      count,
    )) as [string, [string, string[]][]]
    const stale = claimed[1].filter((e) => Array.isArray(e[1]))
    if (stale.length > 0) return toQueued(tenantId, stale)
    // Clear the hint before reading: a commit after this read sets it again.
    await r.srem(k.dirty, tenantId)
    const res = (await r.xreadgroup(
      'GROUP',
      GROUP,
      consumer,
      'COUNT',
      count,
      'STREAMS',
      k.stream(tenantId),
      '>',
    )) as [string, [string, string[]][]][] | null
    return res?.[0] ? toQueued(tenantId, res[0][1]) : []
  }

  const toQueued = (tenantId: string, entries: [string, string[]][]): QueuedReceipts[] =>
    entries.map(([id, fields]) => ({ id, tenantId, payload: payloadOf(fields) }))

  const queue: ReceiptQueue = {
    async dirtyTenants() {
      return r.smembers(k.dirty)
    },
    async read(tenantId, consumer, count) {
      try {
        return await readQueued(tenantId, consumer, count)
      } catch (err) {
        // The stream lost its group (Redis restarted without its data, or a failover promoted a
        // replica that missed the XGROUP): make it again, once, rather than fail every pass.
        if (!String((err as Error).message).startsWith('NOGROUP')) throw err
        groupsMade.delete(tenantId)
        return readQueued(tenantId, consumer, count)
      }
    },
    async ack(tenantId, ids) {
      if (ids.length === 0) return
      // One round trip (both name the tenant's stream: one slot). Called only once the entries
      // are committed to Postgres, so removing them loses nothing even if the XACK failed.
      const results = await r
        .pipeline()
        .xack(k.stream(tenantId), GROUP, ...ids)
        .xdel(k.stream(tenantId), ...ids)
        .exec()
      const failed = results?.find(([err]) => err)
      if (!results || failed) throw failed?.[0] ?? new Error('receipt ack: pipeline not run')
    },
    async backlog(tenantIds) {
      let n = 0
      for (const t of tenantIds) n += await r.xlen(k.stream(t))
      return n
    },
    onQueued(listener) {
      subscribeQueued()
      queuedListeners.add(listener)
      return () => queuedListeners.delete(listener)
    },
  }

  return {
    async used(tenantId, keyId, period) {
      return Number((await r.get(k.quota(tenantId, keyId, period))) ?? 0)
    },

    async publish(snapshot: TenantSnapshot, over?: number) {
      const t = snapshot.tenantId
      const json = JSON.stringify(snapshot)
      const done = await (over === undefined
        ? r.wgPublish(k.ver(t), k.snap(t), snapshot.version, json)
        : r.wgPublish(k.ver(t), k.snap(t), snapshot.version, json, over))
      if (done !== 1) return 'older'
      // Announced after the version is set, on the tenant's own channel (served by its slot's
      // master): only that tenant's followers hear it. A lost announcement only delays a refresh.
      await r.spublish(k.invalidations(t), String(snapshot.version)).catch(() => {})
      return 'published'
    },

    async snapshot(tenantId) {
      const json = await r.get(k.snap(tenantId))
      return json ? (JSON.parse(json) as TenantSnapshot) : null
    },

    async version(tenantId) {
      const v = await r.get(k.ver(tenantId))
      return v === null ? null : Number(v)
    },

    subscribe(tenantId, listener) {
      let f = followed.get(tenantId)
      if (!f) {
        f = { channel: k.invalidations(tenantId), listeners: new Set(), live: false }
        followed.set(tenantId, f)
        byChannel.set(f.channel, tenantId)
      }
      f.listeners.add(listener)
      ssubscribe(f)
      const entry = f
      return () => {
        entry.listeners.delete(listener)
        if (entry.listeners.size > 0 || followed.get(tenantId) !== entry) return
        followed.delete(tenantId)
        byChannel.delete(entry.channel)
        if (entry.live) opts.subscriber.sunsubscribe(entry.channel).catch(() => {})
      }
    },

    async commit(req): Promise<CommitResult> {
      const t = req.tenantId
      const cands = req.grantCandidates
      const tk = keysOf(t)
      const keys = [
        tk.ver,
        req.quota ? quotaKey(t, tk, req.quota.keyId, req.quota.period) : tk.noQuota,
        tk.stream,
      ]
      const args: (string | number)[] = [
        String(req.version),
        req.quota ? req.quota.limit : -1,
        QUOTA_TTL_SECONDS,
      ]
      args.push(cands.length)
      // Most commits offer no grant: no per-candidate arrays are built for them.
      if (cands.length > 0) {
        const now = opts.nowSeconds()
        for (const c of cands) keys.push(k.grant(t, c.grantId))
        for (const c of cands) args.push(Math.max(60, c.expiresAt - now + GRANT_MARKER_GRACE_SECONDS))
        for (const c of cands) args.push(c.grantId)
      }
      args.push(req.durable ? JSON.stringify(req.durable.otherwise) : '')
      for (let i = 0; i < cands.length; i++) {
        const p = req.durable?.ifGranted?.[i]
        args.push(p ? JSON.stringify(p) : '')
      }
      const res = await batcher.commit(t, { keys, args })
      if (res[0] === 'stale') return { status: 'stale', currentVersion: res[1] ? Number(res[1]) : null }
      if (res[0] === 'quota')
        return { status: 'quota_exhausted', used: Number(res[1]), limit: Number(res[2]) }
      const grantId = res[1] || null
      // res[4]: the 1-based index of the candidate whose receipts were queued, or '' for `otherwise`.
      const durable = req.durable
        ? (req.durable.ifGranted?.[Number(res[4]) - 1] ?? req.durable.otherwise)
        : null
      if (res[3]) {
        // A hint for the drainer; the receipt itself is already durable in the stream. At
        // most one per tenant per interval: the drainer reads in batches and also polls.
        const last = hinted.get(t) ?? 0
        const nowMs = Date.now()
        if (nowMs - last >= HINT_INTERVAL_MS) {
          hinted.set(t, nowMs)
          r.multi()
            .sadd(k.dirty, t)
            .publish(queuedChannel, t)
            .exec()
            .catch(() => hinted.delete(t))
        }
      }
      return { status: 'committed', grantId, quotaUsed: req.quota ? Number(res[2]) : null, durable }
    },

    async release(tenantId, quota, grantId) {
      await r.wgRelease(
        quota ? k.quota(tenantId, quota.keyId, quota.period) : k.noQuota(tenantId),
        grantId ? k.grant(tenantId, grantId) : k.noGrant(tenantId),
        quota ? '1' : '0',
        grantId ? '1' : '0',
      )
    },

    async invalidate(tenantId) {
      await r.del(k.ver(tenantId), k.snap(tenantId))
    },

    async seedQuota(tenantId, keyId, period, used) {
      await r.set(k.quota(tenantId, keyId, period), String(used), 'EX', QUOTA_TTL_SECONDS, 'NX')
    },

    async indexKey(secretHash, ref) {
      await r.set(k.keyIndex(secretHash), JSON.stringify(ref))
    },

    async resolveKey(secretHash) {
      const v = await r.get(k.keyIndex(secretHash))
      return v ? (JSON.parse(v) as KeyRef) : null
    },

    receiptQueue: queue,

    async close() {
      followed.clear()
      byChannel.clear()
      queuedListeners.clear()
    },
  }
}

/** An entry's payload; null for one without a JSON `r` field, which the drain reports instead of failing on. */
function payloadOf(fields: string[]): DurablePayload | null {
  const idx = fields.indexOf('r')
  if (idx === -1 || idx % 2 !== 0) return null
  try {
    return JSON.parse(fields[idx + 1] as string) as DurablePayload
  } catch {
    return null
  }
}
