import { type ChainHead, chainReceipts, type Receipt, type ReceiptDraft } from '../core/receipt.js'
import type { ChainedReceipts } from '../store/ports/audit.js'

/** Tenants remembered at most; past it the longest-remembered is dropped (it relearns on its next append). */
export const CHAIN_MAX_TENANTS = 10_000
/**
 * How long a tenant whose remembered head proved wrong stays off the fast path. A head that
 * is wrong once is usually wrong again (another control plane drains the same tenant): each
 * miss costs a statement on top of the transaction, so the fast path is tried again only now
 * and then.
 */
export const CHAIN_BACK_OFF_MS = 1000

export interface ChainPlan {
  batches: ChainedReceipts[]
  /** Every draft's receipt, by receiptId. */
  receipts: Map<string, Receipt>
  /** Each tenant's generation when planned: how `missed` tells an expected miss from a surprise. */
  generations: Map<string, number>
}

/**
 * Where each tenant's chain will stand once every append this process has in flight has
 * landed: what lets the group commit chain a batch in memory and store it in one statement
 * (ReceiptStore.appendChained) instead of reading the head first. Only ever a guess: the
 * store compares it with the locked head row, so a wrong one (another replica, an admin
 * change, a redelivered receipt) costs that batch a retry on the transaction path, never a
 * fork in the chain.
 */
export interface ChainHeads {
  /** Whether the tenant's head is known (never while it backs off: `missed` drops it and `learn` skips it). */
  knows(tenantId: string): boolean
  /**
   * Chains the drafts from the remembered heads and remembers where they end; null when a
   * tenant's head is not known, a receiptId repeats or a draft cannot be serialised (the
   * transaction path handles each of those).
   */
  plan(drafts: readonly ReceiptDraft[]): ChainPlan | null
  /** Receipts that were committed: their tenants' heads stand at least at the newest of them. */
  learn(receipts: readonly Receipt[]): void
  /** Heads another write of this process moved (unknown until learned again). */
  forget(tenantIds: Iterable<string>): void
  /**
   * Tenants of a plan the store found stale, or left unsure by a failed statement. Forgotten;
   * and, unless this process moved their head itself since the plan (a `forget` in between:
   * the miss was expected, not a sign of another writer), not relearned for a while.
   */
  missed(plan: ChainPlan, tenantIds: Iterable<string>): void
}

export interface ChainHeadsOptions {
  /** A monotonic clock (a stepped wall clock must not stretch a back-off). */
  nowMs?: () => number
  backOffMs?: number
}

export function createChainHeads(opts: ChainHeadsOptions = {}): ChainHeads {
  const nowMs = opts.nowMs ?? (() => performance.now())
  const backOffMs = opts.backOffMs ?? CHAIN_BACK_OFF_MS
  const heads = new Map<string, ChainHead>()
  const backingOff = new Map<string, number>()
  /** Bumped by every `forget`; absent is 0. */
  const generations = new Map<string, number>()

  function coolingDown(tenantId: string): boolean {
    const until = backingOff.get(tenantId)
    if (until === undefined) return false
    if (nowMs() < until) return true
    backingOff.delete(tenantId)
    return false
  }

  return {
    knows: (tenantId) => heads.has(tenantId),
    plan(drafts) {
      const byTenant = new Map<string, ReceiptDraft[]>()
      const ids = new Set<string>()
      for (const d of drafts) {
        if (ids.has(d.receiptId) || !heads.has(d.tenantId)) return null
        ids.add(d.receiptId)
        const list = byTenant.get(d.tenantId)
        if (list) list.push(d)
        else byTenant.set(d.tenantId, [d])
      }
      const batches: ChainedReceipts[] = []
      const receipts = new Map<string, Receipt>()
      try {
        for (const [tenantId, list] of byTenant) {
          const from = heads.get(tenantId) as ChainHead // checked above
          const chained = chainReceipts(from, list)
          batches.push({
            tenantId,
            from,
            to: chained.head,
            receipts: chained.receipts,
            bodies: chained.bodies,
          })
          for (const r of chained.receipts) receipts.set(r.receiptId, r)
        }
      } catch {
        return null
      }
      // The next batch chains on from here, before this one has landed: the store checks it.
      const planned = new Map<string, number>()
      for (const b of batches) {
        heads.set(b.tenantId, b.to)
        planned.set(b.tenantId, generations.get(b.tenantId) ?? 0)
      }
      return { batches, receipts, generations: planned }
    },
    learn(receipts) {
      for (const r of receipts) {
        const known = heads.get(r.tenantId)
        if (known && known.seq >= r.seq) continue
        if (coolingDown(r.tenantId)) continue
        remember(heads, r.tenantId, { seq: r.seq, hash: r.hash })
      }
    },
    forget(tenantIds) {
      for (const t of tenantIds) {
        heads.delete(t)
        remember(generations, t, (generations.get(t) ?? 0) + 1)
      }
    },
    missed(plan, tenantIds) {
      const until = nowMs() + backOffMs
      for (const t of tenantIds) {
        heads.delete(t)
        if ((generations.get(t) ?? 0) !== plan.generations.get(t)) continue
        remember(backingOff, t, until)
      }
    },
  }
}

/** Sets a tenant's entry, dropping the oldest first when the map is full. */
function remember<V>(map: Map<string, V>, tenantId: string, value: V): void {
  if (!map.has(tenantId) && map.size >= CHAIN_MAX_TENANTS) {
    const oldest = map.keys().next()
    if (!oldest.done) map.delete(oldest.value)
  }
  map.set(tenantId, value)
}
