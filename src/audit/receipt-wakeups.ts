import type { Logger } from '../observability/logger.js'
import { repeatedFailure } from '../observability/repeated-failure.js'
import type { ReceiptReader } from '../store/ports/receipt-reader.js'
import type { ReceiptListener } from '../store/ports/storage.js'

/**
 * Tells receipt streams that a tenant's log may have grown. A wake-up is only a hint:
 * streams always read `seq > cursor` from the receipts table, so a lost or duplicated
 * wake-up can delay delivery (by at most one poll) but never skip or repeat a receipt.
 *
 * Three sources feed it:
 * - in-process: the audit log announces its own commits (all PGlite needs: one process);
 * - Postgres LISTEN, when other processes write the same database (NOTIFY is sent by the
 *   appending transaction, so it arrives after commit);
 * - a poll of the subscribed tenants' head seqs, one query per interval for the whole
 *   process, so a lost notification never stalls a stream.
 */
export interface ReceiptWakeups {
  /** Announces tenants whose logs grew (called by the audit log after its commits). */
  committed(tenantIds: readonly string[]): void
  /** `onWake(headSeq)`: headSeq is known after a poll, null after a notification. Returns the unsubscribe. */
  subscribe(tenantId: string, onWake: (headSeq: number | null) => void): () => void
  /** Open subscriptions (one per live stream), for leak checks. */
  subscriberCount(): number
  close(): Promise<void>
}

export interface ReceiptWakeupsDeps {
  reader: ReceiptReader
  pollMs: number
  logger: Logger
  /** Receipts other processes commit (Postgres LISTEN); absent where this process is the only writer. */
  listen?: ReceiptListener | undefined
}

export function createReceiptWakeups(deps: ReceiptWakeupsDeps): ReceiptWakeups {
  const subscribers = new Map<string, Set<(headSeq: number | null) => void>>()
  let pollTimer: NodeJS.Timeout | null = null
  let polling = false
  let unlisten: Promise<(() => Promise<void>) | null> | null = null
  let closed = false

  function wake(tenantId: string, headSeq: number | null): void {
    for (const fn of subscribers.get(tenantId) ?? []) fn(headSeq)
  }
  function wakeAll(): void {
    for (const tenantId of subscribers.keys()) wake(tenantId, null)
  }

  const pollFailures = repeatedFailure(deps.logger, 'receipt stream poll')

  async function poll(): Promise<void> {
    if (polling || subscribers.size === 0) return
    polling = true
    try {
      const heads = await deps.reader.headSeqs([...subscribers.keys()])
      for (const [tenantId, seq] of heads) wake(tenantId, seq)
      pollFailures.succeeded()
    } catch (err) {
      pollFailures.failed(err)
    } finally {
      polling = false
    }
  }

  function ensureStarted(): void {
    if (closed) return
    if (!pollTimer) {
      pollTimer = setInterval(() => void poll(), deps.pollMs)
      pollTimer.unref()
    }
    if (deps.listen && !unlisten) {
      // On every (re)connection of the listener, wake everyone: notifications may have been missed.
      unlisten = deps
        .listen((tenantId) => wake(tenantId, null), wakeAll)
        .catch((err) => {
          deps.logger.warn({ err }, 'cannot LISTEN for receipts; streams fall back to polling')
          return null
        })
    }
  }

  return {
    committed(tenantIds) {
      for (const id of tenantIds) wake(id, null)
    },
    subscribe(tenantId, onWake) {
      let set = subscribers.get(tenantId)
      if (!set) {
        set = new Set()
        subscribers.set(tenantId, set)
      }
      set.add(onWake)
      ensureStarted()
      return () => {
        const s = subscribers.get(tenantId)
        s?.delete(onWake)
        if (s?.size === 0) subscribers.delete(tenantId)
        if (subscribers.size === 0 && pollTimer) {
          clearInterval(pollTimer)
          pollTimer = null
        }
      }
    },
    subscriberCount() {
      let n = 0
      for (const set of subscribers.values()) n += set.size
      return n
    },
    async close() {
      closed = true
      if (pollTimer) clearInterval(pollTimer)
      pollTimer = null
      subscribers.clear()
      const stop = await unlisten
      unlisten = null
      await stop?.().catch(() => {})
    },
  }
}
