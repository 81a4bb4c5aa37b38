import type { Redis } from 'ioredis'
import t, { type Test } from 'tap'
import { ManualClock } from '../../src/core/clock.js'
import { draft, type ReceiptDraft } from '../../src/core/receipt.js'
import { createMemoryHotStore } from '../../src/store/memory/hot-store.js'
import type { DurablePayload, HotStore } from '../../src/store/ports/hot-store.js'
import { connectRedis } from '../../src/store/redis/connect.js'
import { createRedisHotStore } from '../../src/store/redis/hot-store.js'
import { openRedisHotStore, subscribed } from '../helpers/redis.js'
import { startRedisCluster } from '../helpers/redis-cluster.js'
import { emptySnapshot } from '../helpers/snapshots.js'
import { waitFor } from '../helpers/wait.js'

const clock = new ManualClock(Date.UTC(2026, 10, 21))
const now = () => Math.floor(clock.nowMs() / 1000)
let n = 0
const tenant = () => `ten_hs${++n}${Math.random().toString(36).slice(2, 8)}`

const snapshot = (tenantId: string, version: number) => emptySnapshot(tenantId, version, now())
const receipt = (tenantId: string, label: string): ReceiptDraft =>
  draft({ receiptId: `rcp_${label}`, tenantId, kind: 'CHECK', createdAt: 1, detail: { label } })
const quota = (limit: number) => ({ keyId: 'key_a', period: '2026-11', limit })
const pl = (receipts: ReceiptDraft[]): DurablePayload => ({ receipts, actions: [] })

/**
 * Where a Redis hot store's subscriptions show: the servers' own lists of subscribed channels,
 * so a test waits for a SUBSCRIBE to land instead of sleeping on it. (The memory store has no
 * server to wait for: its subscriptions hold at once.)
 */
interface Listening {
  /** Whether a tenant's invalidation channel (a shard channel, in the tenant's slot) has a subscriber. */
  invalidations(tenantId: string): Promise<boolean>
  /** Whether the drain-hint channel (the store's one classic channel) has one. */
  queued(): Promise<boolean>
}

function listeningOn(nodes: () => Pick<Redis, 'call'>[], keyPrefix: string): Listening {
  return {
    invalidations: (tenantId) => subscribed(nodes(), `${keyPrefix}*{${tenantId}}*`, 'shard'),
    queued: () => subscribed(nodes(), `${keyPrefix}*`, 'classic'),
  }
}

/** One suite for every hot store (memory and real Redis). */
async function suite(t: Test, hot: HotStore, sunk: DurablePayload[], listening?: Listening) {
  t.test('publish over a named version replaces exactly that one, newer or not', async (t) => {
    // A hot store ahead of a restored database: its version 9 is replaced by the database's 5.
    const ten = tenant()
    t.equal(await hot.publish(snapshot(ten, 5), 9), 'older', 'nothing held: not version 9')
    t.equal(await hot.publish(snapshot(ten, 9)), 'published')
    t.equal(await hot.publish(snapshot(ten, 5), 8), 'older', 'another version held: kept')
    t.equal(await hot.version(ten), 9)
    t.equal(await hot.publish(snapshot(ten, 5), 9), 'published')
    t.equal(await hot.version(ten), 5)
    t.same(await hot.snapshot(ten), snapshot(ten, 5))
    t.equal(await hot.publish(snapshot(ten, 6)), 'published', 'and it moves on from there')
  })

  t.test('publish is monotonic by version and announces each bump', async (t) => {
    const ten = tenant()
    const heard: number[] = []
    const other = tenant()
    const overheard: number[] = []
    const off = hot.subscribe(ten, (v) => heard.push(v))
    const offOther = hot.subscribe(other, (v) => overheard.push(v))
    if (listening)
      await waitFor(
        async () => (await listening.invalidations(ten)) && (await listening.invalidations(other)),
        10_000,
        'both SSUBSCRIBEs to land',
      )
    t.equal(await hot.version(ten), null)
    t.equal(await hot.snapshot(ten), null)
    t.equal(await hot.publish(snapshot(ten, 2)), 'published')
    t.equal(await hot.publish(snapshot(ten, 1)), 'older')
    t.equal(await hot.publish(snapshot(ten, 2)), 'older')
    t.equal(await hot.publish(snapshot(ten, 3)), 'published')
    t.equal(await hot.version(ten), 3)
    t.same(await hot.snapshot(ten), snapshot(ten, 3))
    await waitFor(
      () => heard.length >= 2,
      10_000,
      () => `both announcements (heard ${heard})`,
    )
    t.same(heard, [2, 3])
    t.same(overheard, [], "another tenant's follower hears none of it")
    offOther()
    off()
    await hot.publish(snapshot(ten, 4))
    await new Promise((r) => setTimeout(r, 50))
    t.same(heard, [2, 3], 'nothing after unsubscribing')
  })

  t.test('commit: stale without a snapshot or on another version; nothing counted then', async (t) => {
    const ten = tenant()
    t.same(await hot.commit({ tenantId: ten, version: 1, quota: quota(5), grantCandidates: [] }), {
      status: 'stale',
      currentVersion: null,
    })
    await hot.publish(snapshot(ten, 4))
    t.same(await hot.commit({ tenantId: ten, version: 3, quota: quota(5), grantCandidates: [] }), {
      status: 'stale',
      currentVersion: 4,
    })
    t.equal(await hot.used(ten, 'key_a', '2026-11'), 0)
    t.match(await hot.commit({ tenantId: ten, version: 4, quota: quota(5), grantCandidates: [] }), {
      status: 'committed',
      quotaUsed: 1,
      grantId: null,
    })
    t.match(await hot.commit({ tenantId: ten, version: 4, quota: null, grantCandidates: [] }), {
      status: 'committed',
      quotaUsed: null,
    })
    t.equal(await hot.used(ten, 'key_a', '2026-11'), 1, 'a commit without quota counts nothing')
  })

  t.test('quota is exact under concurrency', async (t) => {
    const ten = tenant()
    await hot.publish(snapshot(ten, 1))
    const results = await Promise.all(
      Array.from({ length: 150 }, () =>
        hot.commit({ tenantId: ten, version: 1, quota: quota(100), grantCandidates: [] }),
      ),
    )
    t.equal(results.filter((r) => r.status === 'committed').length, 100)
    t.equal(results.filter((r) => r.status === 'quota_exhausted').length, 50)
    t.match(
      results.find((r) => r.status === 'quota_exhausted'),
      { used: 100, limit: 100 },
    )
    t.equal(await hot.used(ten, 'key_a', '2026-11'), 100)
  })

  t.test('a grant is consumed at most once, under concurrency; candidates in order', async (t) => {
    const ten = tenant()
    await hot.publish(snapshot(ten, 1))
    const cands = [
      { grantId: 'grt_1', expiresAt: now() + 600 },
      { grantId: 'grt_2', expiresAt: now() + 600 },
    ]
    const results = await Promise.all(
      Array.from({ length: 20 }, () =>
        hot.commit({ tenantId: ten, version: 1, quota: null, grantCandidates: cands }),
      ),
    )
    const got = results.map((r) => (r.status === 'committed' ? r.grantId : 'x'))
    t.same(got.filter((g) => g === 'grt_1').length, 1)
    t.same(got.filter((g) => g === 'grt_2').length, 1)
    t.same(got.filter((g) => g === null).length, 18)
    t.equal(got.indexOf('grt_1') >= 0, true)
  })

  t.test('receipts: the variant of the grant actually consumed, not of the first candidate', async (t) => {
    const ten = tenant()
    await hot.publish(snapshot(ten, 1))
    const c = [
      { grantId: 'grt_a', expiresAt: now() + 60 },
      { grantId: 'grt_b', expiresAt: now() + 60 },
    ]
    const commit = () =>
      hot.commit({
        tenantId: ten,
        version: 1,
        quota: null,
        grantCandidates: c,
        durable: {
          otherwise: pl([receipt(ten, 'deny')]),
          ifGranted: [pl([receipt(ten, 'with-a')]), pl([receipt(ten, 'with-b')])],
        },
      })
    t.match(await commit(), { grantId: 'grt_a', durable: { receipts: [{ detail: { label: 'with-a' } }] } })
    t.match(
      await commit(),
      { grantId: 'grt_b', durable: { receipts: [{ detail: { label: 'with-b' } }] } },
      'grt_a is taken, so grt_b is consumed and its receipts are queued',
    )
    t.match(await commit(), { grantId: null, durable: { receipts: [{ detail: { label: 'deny' } }] } })
  })

  t.test(
    'receipts: the granted variant when a grant was consumed; release gives back quota and grant',
    async (t) => {
      const ten = tenant()
      await hot.publish(snapshot(ten, 1))
      const c = [{ grantId: 'grt_r', expiresAt: now() + 60 }]
      const first = await hot.commit({
        tenantId: ten,
        version: 1,
        quota: quota(10),
        grantCandidates: c,
        durable: {
          otherwise: pl([receipt(ten, 'deny')]),
          ifGranted: [pl([receipt(ten, 'allow'), receipt(ten, 'staged')])],
        },
      })
      t.match(first, {
        status: 'committed',
        grantId: 'grt_r',
        durable: { receipts: [{ detail: { label: 'allow' } }, { detail: { label: 'staged' } }] },
      })
      const second = await hot.commit({
        tenantId: ten,
        version: 1,
        quota: quota(10),
        grantCandidates: c,
        durable: { otherwise: pl([receipt(ten, 'deny2')]), ifGranted: [pl([receipt(ten, 'allow2')])] },
      })
      t.match(second, {
        status: 'committed',
        grantId: null,
        durable: { receipts: [{ detail: { label: 'deny2' } }] },
      })
      await hot.release(ten, quota(10), 'grt_r')
      t.equal(await hot.used(ten, 'key_a', '2026-11'), 1)
      t.match(
        await hot.commit({ tenantId: ten, version: 1, quota: null, grantCandidates: c }),
        { grantId: 'grt_r' },
        'released grants can be used again',
      )
      if (hot.receiptQueue === null)
        t.same(
          sunk.slice(-2).map((b) => b.receipts.map((r) => r.detail.label)),
          [['allow', 'staged'], ['deny2']],
          'memory: made durable through the sink',
        )
    },
  )

  t.test('commits made in one turn are each answered on their own, in order', async (t) => {
    const [ten, other] = [tenant(), tenant()]
    await hot.publish(snapshot(ten, 2))
    await hot.publish(snapshot(other, 1))
    const g = [{ grantId: 'grt_one', expiresAt: now() + 600 }]
    const labelled = (tenantId: string, label: string) => ({
      otherwise: pl([receipt(tenantId, label)]),
    })
    // No await between them: a batching store sends these together.
    const results = await Promise.all([
      hot.commit({ tenantId: ten, version: 1, quota: quota(1), grantCandidates: [] }),
      hot.commit({
        tenantId: ten,
        version: 2,
        quota: quota(1),
        grantCandidates: [],
        durable: labelled(ten, 'first'),
      }),
      hot.commit({
        tenantId: ten,
        version: 2,
        quota: quota(1),
        grantCandidates: [],
        durable: labelled(ten, 'second'),
      }),
      hot.commit({
        tenantId: other,
        version: 1,
        quota: null,
        grantCandidates: g,
        durable: labelled(other, 'o1'),
      }),
      hot.commit({
        tenantId: other,
        version: 1,
        quota: null,
        grantCandidates: g,
        durable: labelled(other, 'o2'),
      }),
    ])
    t.same(results[0], { status: 'stale', currentVersion: 2 }, 'an old version is stale, counting nothing')
    t.match(results[1], {
      status: 'committed',
      quotaUsed: 1,
      durable: { receipts: [{ detail: { label: 'first' } }] },
    })
    t.same(
      results[2],
      { status: 'quota_exhausted', used: 1, limit: 1 },
      'the next in the same turn sees the count',
    )
    t.match(results[3], {
      status: 'committed',
      grantId: 'grt_one',
      durable: { receipts: [{ detail: { label: 'o1' } }] },
    })
    t.match(results[4], {
      status: 'committed',
      grantId: null,
      durable: { receipts: [{ detail: { label: 'o2' } }] },
    })
    t.equal(await hot.used(ten, 'key_a', '2026-11'), 1)
  })

  t.test('seedQuota only fills a missing counter; the key index resolves', async (t) => {
    const ten = tenant()
    await hot.seedQuota(ten, 'key_a', '2026-11', 40)
    await hot.seedQuota(ten, 'key_a', '2026-11', 7)
    t.equal(await hot.used(ten, 'key_a', '2026-11'), 40)
    await hot.indexKey(`hash-${ten}`, { tenantId: ten, keyId: 'key_a' })
    t.same(await hot.resolveKey(`hash-${ten}`), { tenantId: ten, keyId: 'key_a' })
    t.equal(await hot.resolveKey('hash-nope'), null)
  })
}

t.test('hot store contract: memory', async (t) => {
  const sunk: DurablePayload[] = []
  const hot = createMemoryHotStore({ receiptSink: async (r) => void sunk.push(r) })
  await suite(t, hot, sunk)
  t.test('memory: a receipt that cannot be made durable undoes the commit', async (t) => {
    const failing = createMemoryHotStore({ receiptSink: async () => Promise.reject(new Error('disk full')) })
    const ten = tenant()
    await failing.publish(snapshot(ten, 1))
    await t.rejects(
      failing.commit({
        tenantId: ten,
        version: 1,
        quota: quota(5),
        grantCandidates: [{ grantId: 'grt_x', expiresAt: now() + 60 }],
        durable: { otherwise: pl([receipt(ten, 'x')]) },
      }),
    )
    t.equal(await failing.used(ten, 'key_a', '2026-11'), 0)
  })
})

/** The receipt queue of a Redis hot store (standalone or cluster): durable until acknowledged. */
function receiptQueueSuite(t: Test, hot: HotStore, listening: Listening) {
  t.test(
    'redis: committed receipts wait in the queue until acknowledged; a crashed drainer is claimed from',
    async (t) => {
      const q = hot.receiptQueue!
      const ten = tenant()
      await hot.publish(snapshot(ten, 1))
      let woken = 0
      const off = q.onQueued(() => woken++)
      await waitFor(() => listening.queued(), 10_000, 'the drain-hint SUBSCRIBE to land')
      for (const label of ['a', 'b', 'c'])
        await hot.commit({
          tenantId: ten,
          version: 1,
          quota: null,
          grantCandidates: [],
          durable: { otherwise: pl([receipt(ten, label)]) },
        })
      await waitFor(async () => (await q.dirtyTenants()).includes(ten), 10_000, 'the tenant to be marked')
      t.ok((await q.dirtyTenants()).includes(ten), 'the tenant is marked for draining')
      t.equal(await q.backlog([ten]), 3)
      const crashed = await q.read(ten, 'drainer-1', 10)
      t.same(
        crashed.map((e) => e.payload?.receipts[0]?.detail.label),
        ['a', 'b', 'c'],
      )
      t.notOk((await q.dirtyTenants()).includes(ten))
      await new Promise((r) => setTimeout(r, 150)) // drainer-1 never acknowledges
      const again = await q.read(ten, 'drainer-2', 10)
      t.same(
        again.map((e) => e.payload?.receipts[0]?.detail.label),
        ['a', 'b', 'c'],
        'claimed by another drainer',
      )
      await q.ack(
        ten,
        again.map((e) => e.id),
      )
      t.equal(await q.backlog([ten]), 0)
      t.same(await q.read(ten, 'drainer-2', 10), [])
      await waitFor(() => woken >= 1, 10_000, 'a drain hint')
      t.ok(woken >= 1, 'drainers are woken')
      off()
    },
  )
}

t.test('hot store contract: real Redis', async (t) => {
  const { tr, redis, hot } = await openRedisHotStore(t, { nowSeconds: now, claimIdleMs: 100 })
  const listening = listeningOn(() => [redis], tr.prefix)
  await suite(t, hot, [], listening)

  receiptQueueSuite(t, hot, listening)

  t.test('redis: the commits of one turn share one script call per tenant, 64 at most', async (t) => {
    const ten = tenant()
    await hot.publish(snapshot(ten, 1))
    let scriptCalls = 0
    const sendCommand = redis.sendCommand.bind(redis)
    redis.sendCommand = ((command: { name: string }, ...rest: unknown[]) => {
      if (command.name === 'evalsha' || command.name === 'eval') scriptCalls++
      return (sendCommand as (...a: unknown[]) => unknown)(command, ...rest)
    }) as typeof redis.sendCommand
    t.teardown(() => {
      redis.sendCommand = sendCommand
    })
    const results = await Promise.all(
      Array.from({ length: 100 }, () =>
        hot.commit({ tenantId: ten, version: 1, quota: quota(70), grantCandidates: [] }),
      ),
    )
    t.equal(scriptCalls, 2, '100 commits travel as 64 + 36')
    t.same(
      results.map((r) => r.status),
      [...Array(70).fill('committed'), ...Array(30).fill('quota_exhausted')],
      'answered in the order they were made',
    )
    scriptCalls = 0
    await hot.commit({ tenantId: ten, version: 1, quota: null, grantCandidates: [] })
    await hot.commit({ tenantId: ten, version: 1, quota: null, grantCandidates: [] })
    t.equal(scriptCalls, 2, 'commits awaited one after another each go at once')
  })

  t.test('redis: every key of a tenant carries its hash tag', async (t) => {
    const keys = await redis.keys(`${tr.prefix}*`)
    const untagged = keys.filter((key) => !/\{[^}]+\}/.test(key) && key !== `${tr.prefix}dirty`)
    t.same(untagged, [])
  })
})

t.test('redis: draining a tenant that never queued anything creates nothing', async (t) => {
  const { tr, redis, hot } = await openRedisHotStore(t, { nowSeconds: now, claimIdleMs: 100 })
  t.same(await hot.receiptQueue?.read('ten_quiet', 'd1', 10), [])
  t.same(await redis.keys(`${tr.prefix}*`), [], 'no stream or group was made for it')
})

t.test('hot store contract: real Redis Cluster, three masters', async (t) => {
  const cluster = await startRedisCluster(t)
  const opts = { url: cluster.url, keyPrefix: 'wgc:', cluster: true }
  const redis = connectRedis(opts)
  const subscriber = connectRedis(opts, 'subscriber')
  await redis.connect()
  await subscriber.connect()
  const hot = createRedisHotStore({ redis, subscriber, keyPrefix: 'wgc:', nowSeconds: now, claimIdleMs: 100 })
  t.teardown(async () => {
    await hot.close()
    redis.disconnect()
    subscriber.disconnect()
  })
  // Each master knows the shard channels of its slots; a classic SUBSCRIBE is on whichever node.
  const listening = listeningOn(() => cluster.client.nodes('all'), 'wgc:')
  await suite(t, hot, [], listening)
  receiptQueueSuite(t, hot, listening)

  t.test("cluster: tenants' keys spread over the masters, each tenant's in one slot", async (t) => {
    const tenants = Array.from({ length: 12 }, () => tenant())
    for (const ten of tenants) {
      await hot.publish(snapshot(ten, 1))
      await hot.commit({
        tenantId: ten,
        version: 1,
        quota: quota(5),
        grantCandidates: [{ grantId: 'grt_x', expiresAt: now() + 600 }],
        durable: { otherwise: pl([receipt(ten, 'c')]) },
      })
    }
    const byNode = await Promise.all(cluster.client.nodes('master').map((node) => node.keys('wgc:*')))
    t.ok(byNode.filter((keys) => keys.length > 0).length >= 2, 'more than one master holds tenant keys')
    for (const ten of tenants) {
      const keys = byNode.flat().filter((k) => k.includes(`{${ten}}`))
      t.ok(keys.length >= 5, `${ten}: version, snapshot, quota, grant marker and stream`)
      const slots = new Set(
        await Promise.all(keys.map((k) => cluster.client.cluster('KEYSLOT', k) as Promise<number>)),
      )
      t.equal(slots.size, 1, `${ten}: all its keys in one slot`)
    }
  })

  t.test(
    "cluster: a script naming two tenants' keys is refused (CROSSSLOT): the tags are what keep commits whole",
    async (t) => {
      const [a, b] = [tenant(), tenant()]
      let err: unknown = null
      for (let i = 0; i < 20 && err === null; i++) {
        // Two tenants may hash to one slot by chance; another pair is tried until they do not.
        const x = `wgc:{${a}${i}}:ver`
        const y = `wgc:{${b}${i}}:ver`
        const sx = (await cluster.client.cluster('KEYSLOT', x)) as number
        const sy = (await cluster.client.cluster('KEYSLOT', y)) as number
        if (sx === sy) continue
        err = await cluster.client.eval("return redis.call('GET', KEYS[1])", 2, x, y).then(
          () => 'no error',
          (e: Error) => e,
        )
      }
      t.match(String(err), /CROSSSLOT|same slot/)
    },
  )
})
