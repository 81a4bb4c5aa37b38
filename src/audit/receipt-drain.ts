import type { Logger } from '../observability/logger.js'
import { repeatedFailure } from '../observability/repeated-failure.js'
import type { DurablePayload, QueuedReceipts, ReceiptQueue } from '../store/ports/hot-store.js'
import type { SystemOfRecord } from '../store/ports/index.js'
import type { AuditLog } from './audit-log.js'
import { persistDurable } from './persist-durable.js'
import { unfitPayload } from './queued-payload.js'

export interface ReceiptDrain {
  start(): void
  stop(): Promise<void>
  /** Drains every tenant now (tests and shutdown). */
  drainAll(): Promise<number>
  /** Entries waiting at the last pass. */
  backlog(): number
}

const BATCH = 500
const RECENT_MS = 30_000
/** Unfit entries reported at most once each per process (they are met again at every reclaim). */
const MAX_REPORTED = 10_000

/**
 * Moves proxy receipts from the hot store into the Postgres audit log: at least once,
 * deduplicated by receiptId (appends are idempotent), acknowledged only after the commit.
 * Woken by proxies; a periodic sweep over every tenant covers a lost wake-up or hint.
 */
export function createReceiptDrain(deps: {
  queue: ReceiptQueue
  sor: SystemOfRecord
  audit: AuditLog
  logger: Logger
  consumer: string
  tenantIds: () => Promise<string[]>
  sweepIntervalMs?: number
  pollIntervalMs?: number
}): ReceiptDrain {
  const { queue, sor, audit, logger } = deps
  let running = false
  let loop: Promise<void> | undefined
  let wake: (() => void) | undefined
  let lastBacklog = 0
  let lastSweep = 0
  let unsubscribe: (() => void) | undefined
  let hinted = false

  /**
   * A read whose failure is handled from the start: the read-ahead is awaited only once the
   * batch before it is stored, and a rejection with no handler meanwhile (Redis timing out while
   * Postgres is slow) would end the process. Awaiting it still throws.
   */
  function readAhead(tenantId: string): Promise<QueuedReceipts[]> {
    return settledLater(queue.read(tenantId, deps.consumer, BATCH))
  }

  /** `untilEmpty`: keep reading past a short batch (drainAll: tests and shutdown). */
  async function drainTenant(tenantId: string, untilEmpty: boolean): Promise<number> {
    let moved = 0
    let next: Promise<QueuedReceipts[]> | null = readAhead(tenantId)
    // The last batch's acknowledgement, sent while the next batch commits (one at a time). A
    // failed one leaves its entries pending in the stream, to be claimed and appended again,
    // which changes nothing (appends are idempotent); the pass still reports it.
    let acking: Promise<void> | null = null
    try {
      while (next) {
        const entries: QueuedReceipts[] = await next
        if (entries.length === 0) break
        // A short batch means the stream is caught up. Reading again at once would chase the
        // proxies one receipt at a time, a Postgres transaction each; the next hint or poll
        // comes soon enough, and the receipts wait durable in the stream meanwhile.
        const more = entries.length === BATCH || untilEmpty
        // The next batch is read while this one commits. If the commit fails, those entries
        // stay unacknowledged in the stream and are claimed again (nothing is lost).
        next = more ? readAhead(tenantId) : null
        // An entry that cannot go into the log is left in the stream, unacknowledged and
        // reported, instead of failing its whole batch at every retry with the good entries
        // read alongside it.
        const fit: { id: string; payload: DurablePayload }[] = []
        for (const e of entries) {
          const problem = unfitPayload(tenantId, e.payload)
          if (problem === null) fit.push(e as { id: string; payload: DurablePayload })
          else report(tenantId, e.id, problem)
        }
        if (fit.length > 0) {
          await persistDurable(sor, audit, {
            receipts: fit.flatMap((e) => e.payload.receipts),
            actions: fit.flatMap((e) => e.payload.actions),
          })
          const previous = acking
          acking = settledLater(
            queue.ack(
              tenantId,
              fit.map((e) => e.id),
            ),
          )
          if (previous) await previous
        }
        moved += fit.reduce((n, e) => n + e.payload.receipts.length, 0)
      }
    } catch (err) {
      // Not left running past the pass: the pass's failure is this one.
      await (acking as Promise<void> | null)?.catch(() => {})
      throw err
    }
    if (acking) await acking
    return moved
  }

  const failures = repeatedFailure(logger, 'receipt drain pass')
  const reported = new Set<string>()
  function report(tenantId: string, entryId: string, problem: string): void {
    if (reported.has(entryId)) return
    if (reported.size >= MAX_REPORTED) reported.clear()
    reported.add(entryId)
    logger.error(
      { tenantId, entryId, problem },
      'receipt drain: a queued entry cannot go into the audit log; it stays in the stream, unacknowledged',
    )
  }

  /** Tenants that queued recently: looked at on every pass, since proxies throttle their hints. */
  const recent = new Map<string, number>()

  async function pass(sweep: boolean, untilEmpty = false): Promise<number> {
    const now = Date.now()
    const tenants = new Set(await queue.dirtyTenants())
    for (const [t, at] of recent) {
      if (now - at > RECENT_MS) recent.delete(t)
      else tenants.add(t)
    }
    if (sweep) for (const t of await deps.tenantIds()) tenants.add(t)
    let moved = 0
    // One tenant's failure (its stream broken, its cluster master away) must not hold up the
    // tenants after it: each is drained on its own, and the pass reports the first failure.
    let failed: unknown = null
    for (const t of tenants) {
      try {
        const n = await drainTenant(t, untilEmpty)
        if (n > 0) recent.set(t, now)
        moved += n
      } catch (err) {
        failed ??= err
      }
    }
    if (sweep) lastBacklog = await queue.backlog([...tenants])
    if (failed !== null) throw failed
    return moved
  }

  return {
    start() {
      if (running) return
      running = true
      // A hint that lands during a pass is remembered, so the loop goes round again at once
      // instead of sleeping through it until the next poll.
      unsubscribe = queue.onQueued(() => {
        hinted = true
        wake?.()
      })
      loop = (async () => {
        while (running) {
          const now = Date.now()
          const sweep = now - lastSweep >= (deps.sweepIntervalMs ?? 10_000)
          hinted = false
          // A sweep that met a failing tenant still counts: the next is due an interval later,
          // not at every poll.
          if (sweep) lastSweep = now
          try {
            await pass(sweep)
            failures.succeeded()
          } catch (err) {
            // Redis or Postgres away: nothing was acknowledged, so nothing is lost; retry.
            failures.failed(err)
            hinted = false // retry at the poll interval, not at every hint while a store is away
          }
          await new Promise<void>((resolve) => {
            if (hinted || !running) return resolve()
            const timer = setTimeout(resolve, deps.pollIntervalMs ?? 1000)
            wake = () => {
              clearTimeout(timer)
              resolve()
            }
          })
          wake = undefined
        }
      })()
    },
    async stop() {
      running = false
      unsubscribe?.()
      wake?.()
      await loop
    },
    async drainAll() {
      return pass(true, true)
    },
    backlog: () => lastBacklog,
  }
}

/**
 * A promise awaited only later (a read-ahead, an acknowledgement sent while the next batch
 * commits): a rejection with no handler meanwhile would end the process. Awaiting it still throws.
 */
function settledLater<T>(p: Promise<T>): Promise<T> {
  p.catch(() => {})
  return p
}
