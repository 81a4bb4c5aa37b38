import { ERRORS, WriteGateError } from '../core/errors.js'
import { canonicalJson } from '../core/jcs.js'
import type { Receipt, ReceiptDraft } from '../core/receipt.js'
import type { SystemOfRecord } from '../store/ports/index.js'
import type { AuditLog } from './audit-log.js'
import { type ChainHeadsOptions, createChainHeads } from './chain-heads.js'

export interface GroupCommitOptions {
  sor: SystemOfRecord
  /** Most receipts written by one batch (one caller's drafts are never split). */
  maxBatch?: number
  /** Most receipts waiting for a batch; past it, append() refuses at once (fail closed). */
  maxQueue?: number
  /** Batches in flight at once. */
  maxInFlight?: number
  /** Called after a batch that wrote receipts of these tenants has committed. */
  onCommitted?: (tenantIds: readonly string[]) => void
  /** How many receipts took which path (the writegate_audit_appends_total metric). */
  onPath?: (path: AppendPath, receipts: number) => void
  /** The remembered heads' clock and back-off (tests). */
  heads?: ChainHeadsOptions
}

/**
 * `chained`: stored by the one-statement fast path; `transaction`: stored by the transaction
 * path; `stale` and `failed`: sent down the fast path, found a moved head or a failed
 * statement, and retried in a transaction (so also counted there).
 */
export type AppendPath = 'chained' | 'transaction' | 'stale' | 'failed'

interface Pending {
  drafts: readonly ReceiptDraft[]
  resolve: (receipts: Receipt[]) => void
  reject: (err: unknown) => void
}

export const GROUP_COMMIT_DEFAULTS = { maxBatch: 512, maxQueue: 50_000, maxInFlight: 2 } as const

/**
 * The group-committing audit log. append() queues the caller's drafts; whenever no
 * batch is being written (or a full batch is waiting and another may start), the queue
 * is drained into one batch: one statement where this process knows the heads, else one
 * transaction. Under load many callers share one commit (one fsync, one head-row lock per
 * tenant), so throughput grows with concurrency instead of queueing on the tenant's head
 * row. Each caller's promise settles with its own drafts: it resolves after they are
 * committed, and rejects if their write failed, in which case none of them was written.
 */
export function createGroupCommitAuditLog(opts: GroupCommitOptions): AuditLog {
  const maxBatch = opts.maxBatch ?? GROUP_COMMIT_DEFAULTS.maxBatch
  const maxQueue = opts.maxQueue ?? GROUP_COMMIT_DEFAULTS.maxQueue
  const maxInFlight = opts.maxInFlight ?? GROUP_COMMIT_DEFAULTS.maxInFlight
  const queue: Pending[] = []
  let queued = 0
  let inFlight = 0
  let idleWaiters: (() => void)[] = []
  const heads = createChainHeads(opts.heads)
  const count = (path: AppendPath, receipts: number) => {
    try {
      opts.onPath?.(path, receipts)
    } catch {
      // A metric must never fail or strand a commit.
    }
  }

  function kick(): void {
    while (queue.length > 0 && inFlight < maxInFlight && (inFlight === 0 || queued >= maxBatch)) {
      const batch: Pending[] = []
      let size = 0
      while (queue.length > 0) {
        const next = queue[0] as Pending
        if (batch.length > 0 && size + next.drafts.length > maxBatch) break
        queue.shift()
        batch.push(next)
        size += next.drafts.length
      }
      queued -= size
      inFlight += 1
      void commit(batch).finally(() => {
        inFlight -= 1
        kick()
        if (inFlight === 0 && queue.length === 0) {
          const waiters = idleWaiters
          idleWaiters = []
          for (const w of waiters) w()
        }
      })
    }
  }

  /**
   * The fast path: callers whose drafts are of one tenant whose head this process knows are
   * chained here and stored by one statement (one round trip, the head locked only for it).
   * One tenant per caller keeps a caller's drafts all-or-nothing, as the transaction path
   * does. What is left for the transaction path: every other caller, the callers of tenants
   * whose head had moved, or everyone if the statement failed (it wrote nothing; a receiptId
   * already stored is the usual cause, and the transaction path deduplicates).
   */
  async function commitChained(batch: Pending[]): Promise<Pending[]> {
    const fast: Pending[] = []
    const left: Pending[] = []
    // A caller spanning tenants goes by transaction, which will move those heads: forgotten
    // first, so no caller of theirs in this batch is sent from a head about to be wrong.
    for (const p of batch) if (!oneTenant(p.drafts)) heads.forget(new Set(p.drafts.map((d) => d.tenantId)))
    for (const p of batch) (chainable(p.drafts) ? fast : left).push(p)
    if (fast.length === 0) return batch
    const plan = heads.plan(fast.flatMap((p) => p.drafts))
    if (!plan) return batch
    let stale: Set<string>
    try {
      stale = new Set((await opts.sor.stores.receipts.appendChained(plan.batches)).stale)
      if (stale.size > 0) count('stale', countOf(fast, stale))
    } catch {
      stale = new Set(plan.batches.map((b) => b.tenantId))
      count('failed', plan.receipts.size)
    }
    heads.missed(plan, stale)
    const written: ReceiptDraft[] = []
    for (const p of fast) {
      if (stale.has((p.drafts[0] as ReceiptDraft).tenantId)) {
        left.push(p)
        continue
      }
      written.push(...p.drafts)
      p.resolve(p.drafts.map((d) => plan.receipts.get(d.receiptId) as Receipt)) // planned above
    }
    if (written.length > 0) {
      count('chained', written.length)
      notify(written)
    }
    return left
  }

  function chainable(drafts: readonly ReceiptDraft[]): boolean {
    return oneTenant(drafts) && heads.knows((drafts[0] as ReceiptDraft).tenantId)
  }

  async function commit(whole: Pending[]): Promise<void> {
    const batch = await commitChained(whole)
    if (batch.length === 0) return
    const drafts = batch.flatMap((p) => p.drafts)
    let receipts: Receipt[]
    try {
      receipts = await opts.sor.transaction((stores) => stores.receipts.append(drafts))
    } catch (err) {
      // A draft that cannot be serialised fails the whole transaction (the chain is hashed
      // inside it). Rather than canonicalising every draft twice to refuse it up front, a
      // failed batch is looked at caller by caller: such drafts are refused alone and the
      // others go into the next transaction, ahead of later appends.
      const unserialisable = batch.length > 1 ? batch.filter((p) => !serialisable(p.drafts)) : []
      if (unserialisable.length === 0) {
        for (const p of batch) p.reject(err)
        return
      }
      for (const p of unserialisable) p.reject(new TypeError('receipt draft cannot be serialised'))
      const retry = batch.filter((p) => !unserialisable.includes(p))
      queue.unshift(...retry)
      queued += retry.reduce((n, p) => n + p.drafts.length, 0)
      return
    }
    heads.learn(receipts)
    count('transaction', receipts.length)
    let at = 0
    for (const p of batch) {
      p.resolve(receipts.slice(at, at + p.drafts.length))
      at += p.drafts.length
    }
    notify(drafts)
  }

  function notify(drafts: readonly ReceiptDraft[]): void {
    try {
      opts.onCommitted?.([...new Set(drafts.map((d) => d.tenantId))])
    } catch {
      // A wake-up is best effort: streams also poll.
    }
  }

  return {
    async appendWith(stores, drafts) {
      const receipts = await stores.receipts.append(drafts)
      // These heads move outside the group commit (and only if the caller commits).
      heads.forget(new Set(drafts.map((d) => d.tenantId)))
      // Runs before the caller commits: a stream woken now may not see these rows yet and
      // picks them up on its next read (Postgres also sends NOTIFY at commit).
      notify(drafts)
      return receipts
    },
    append(drafts) {
      if (drafts.length === 0) return Promise.resolve([])
      if (queued + drafts.length > maxQueue && queued > 0) {
        return Promise.reject(new WriteGateError(ERRORS.unavailable, { reason: 'audit_backlog' }))
      }
      return new Promise<Receipt[]>((resolve, reject) => {
        queue.push({ drafts, resolve, reject })
        queued += drafts.length
        kick()
      })
    },
    flush() {
      if (inFlight === 0 && queue.length === 0) return Promise.resolve()
      return new Promise<void>((resolve) => idleWaiters.push(resolve))
    },
  }
}

function oneTenant(drafts: readonly ReceiptDraft[]): boolean {
  const tenantId = drafts[0]?.tenantId
  if (tenantId === undefined) return false
  for (const d of drafts) if (d.tenantId !== tenantId) return false
  return true
}

function countOf(callers: readonly Pending[], tenantIds: ReadonlySet<string>): number {
  let n = 0
  for (const p of callers) if (tenantIds.has((p.drafts[0] as ReceiptDraft).tenantId)) n += p.drafts.length
  return n
}

function serialisable(drafts: readonly ReceiptDraft[]): boolean {
  try {
    for (const d of drafts) canonicalJson(d)
    return true
  } catch {
    return false
  }
}
