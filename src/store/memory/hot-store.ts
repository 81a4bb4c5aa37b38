import type { TenantSnapshot } from '../../core/snapshot.js'
import type {
  CommitResult,
  DurablePayload,
  HotStore,
  InvalidationListener,
  KeyRef,
} from '../ports/hot-store.js'

/** Where the memory store makes proxy receipts durable: the audit log, in the same process. */
export type ReceiptSink = (payload: DurablePayload) => Promise<unknown>

/**
 * Hot state for the single-process default. JavaScript runs one commit's checks and
 * mutations without yielding, which gives the atomicity Redis gets from a Lua script.
 */
export function createMemoryHotStore(opts: { receiptSink?: ReceiptSink } = {}): HotStore {
  const snapshots = new Map<string, TenantSnapshot>()
  const quota = new Map<string, number>()
  /** Consumed grant ids, with their expiry so the set can be pruned. */
  const consumed = new Map<string, number>()
  const listeners = new Map<string, Set<InvalidationListener>>()
  const keyIndex = new Map<string, KeyRef>()
  const quotaKey = (tenantId: string, keyId: string, period: string) => `${tenantId}:${keyId}:${period}`

  function prune(nowSeconds: number): void {
    for (const [id, exp] of consumed) if (exp <= nowSeconds) consumed.delete(id)
  }

  return {
    async used(tenantId, keyId, period) {
      return quota.get(quotaKey(tenantId, keyId, period)) ?? 0
    },

    async publish(snapshot, over) {
      const current = snapshots.get(snapshot.tenantId)
      if (over === undefined ? current && current.version >= snapshot.version : current?.version !== over)
        return 'older'
      snapshots.set(snapshot.tenantId, snapshot)
      prune(snapshot.builtAt)
      for (const l of listeners.get(snapshot.tenantId) ?? []) l(snapshot.version)
      return 'published'
    },

    async snapshot(tenantId) {
      return snapshots.get(tenantId) ?? null
    },

    async version(tenantId) {
      return snapshots.get(tenantId)?.version ?? null
    },

    subscribe(tenantId, listener) {
      const set = listeners.get(tenantId) ?? new Set<InvalidationListener>()
      listeners.set(tenantId, set)
      set.add(listener)
      return () => {
        set.delete(listener)
        if (set.size === 0 && listeners.get(tenantId) === set) listeners.delete(tenantId)
      }
    },

    async commit(req): Promise<CommitResult> {
      const snap = snapshots.get(req.tenantId)
      if (!snap || snap.version !== req.version)
        return { status: 'stale', currentVersion: snap?.version ?? null }
      const qk = req.quota ? quotaKey(req.tenantId, req.quota.keyId, req.quota.period) : null
      const used = qk ? (quota.get(qk) ?? 0) : 0
      if (req.quota && used >= req.quota.limit)
        return { status: 'quota_exhausted', used, limit: req.quota.limit }
      let grantId: string | null = null
      let granted = -1
      for (const [i, c] of req.grantCandidates.entries()) {
        if (!consumed.has(c.grantId)) {
          grantId = c.grantId
          granted = i
          consumed.set(c.grantId, c.expiresAt)
          break
        }
      }
      if (qk) quota.set(qk, used + 1)
      const durable = req.durable ? (req.durable.ifGranted?.[granted] ?? req.durable.otherwise) : null
      if (durable) {
        if (!opts.receiptSink) throw new Error('memory hot store has no receipt sink')
        try {
          await opts.receiptSink(durable)
        } catch (err) {
          // Not durable: undo, so nothing is counted or consumed for a write that will not happen.
          if (grantId) consumed.delete(grantId)
          if (qk) quota.set(qk, (quota.get(qk) ?? 1) - 1)
          throw err
        }
      }
      return { status: 'committed', grantId, quotaUsed: qk ? used + 1 : null, durable }
    },

    async release(tenantId, q, grantId) {
      if (grantId) consumed.delete(grantId)
      if (q) {
        const k = quotaKey(tenantId, q.keyId, q.period)
        quota.set(k, Math.max(0, (quota.get(k) ?? 0) - 1))
      }
    },

    async invalidate(tenantId) {
      snapshots.delete(tenantId)
    },

    async seedQuota(tenantId, keyId, period, used) {
      const k = quotaKey(tenantId, keyId, period)
      if (!quota.has(k)) quota.set(k, used)
    },

    async indexKey(secretHash, ref) {
      keyIndex.set(secretHash, ref)
    },

    async resolveKey(secretHash) {
      return keyIndex.get(secretHash) ?? null
    },

    // In one process, proxy receipts go straight to the audit log (the sink): nothing queues.
    receiptQueue: null,

    async close() {
      listeners.clear()
    },
  }
}
