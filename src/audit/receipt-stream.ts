import type { ServerResponse } from 'node:http'
import { receiptJsonFromStored } from '../core/audit-export.js'
import type { ReceiptReader } from '../store/ports/receipt-reader.js'
import type { ReceiptWakeups } from './receipt-wakeups.js'

export interface ReceiptStreamDeps {
  reader: ReceiptReader
  wakeups: ReceiptWakeups
  /** A `: keepalive` comment is written this often. */
  keepaliveMs: number
  logger: { warn(obj: object, msg: string): void }
  /** Receipts read per query. */
  pageSize?: number
  /**
   * Asked before every delivery and at every keepalive: a stream must not outlive its
   * credential (a revoked key, an ended portal session), nor deliver one receipt after it.
   */
  stillAuthorized?: () => Promise<boolean>
}

export interface ReceiptStream {
  /** Ends the response (server shutdown). */
  close(): void
  /** Resolves once the stream has stopped and released its timer and subscription. */
  readonly done: Promise<void>
}

/** The headers a receipt stream opens with (and a HEAD of it answers with). */
export const RECEIPT_STREAM_HEADERS = {
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-cache, no-store',
  connection: 'keep-alive',
  'x-accel-buffering': 'no',
} as const

/**
 * One Server-Sent Events stream of a tenant's receipts after `cursor`. The cursor is the
 * only state: every read is `seq > cursor` from the receipts table, and the cursor moves
 * only past receipts written to the socket. Because seq values become visible in order
 * (the head row is locked until commit), replay and live delivery are the same loop,
 * and a reconnect with the last id seen continues with no gap and no duplicate.
 */
export function startReceiptStream(
  res: ServerResponse,
  tenantId: string,
  cursor: number,
  deps: ReceiptStreamDeps,
): ReceiptStream {
  const pageSize = deps.pageSize ?? 500
  let pumping = false
  let again = false
  let stopped = false
  let finish = () => {}
  const done = new Promise<void>((resolve) => {
    finish = resolve
  })

  res.writeHead(200, RECEIPT_STREAM_HEADERS)
  // Clients reconnect after 1 s; the comment makes the headers leave at once.
  res.write('retry: 1000\n: stream open\n\n')

  const keepalive = setInterval(() => {
    if (stopped) return
    if (!deps.stillAuthorized) {
      res.write(': keepalive\n\n')
      return
    }
    deps.stillAuthorized().then(
      (ok) => {
        if (stopped) return
        if (ok) res.write(': keepalive\n\n')
        else {
          // Stopped now, not at 'close': a client that reads slowly delays that, and the next
          // keepalive would write after the end.
          res.end()
          stop()
        }
      },
      // Cannot tell (a store blip): keep the stream, ask again next time.
      () => {
        if (!stopped) res.write(': keepalive\n\n')
      },
    )
  }, deps.keepaliveMs)
  const unsubscribe = deps.wakeups.subscribe(tenantId, (headSeq) => {
    if (headSeq === null || headSeq > cursor) void pump()
  })

  function stop(): void {
    if (stopped) return
    stopped = true
    clearInterval(keepalive)
    unsubscribe()
    finish()
  }
  res.on('close', stop)
  // A client gone before the stream opened (during the route's auth) closes nothing again: the
  // stream would hold its subscription, timer and slot for ever (found in review).
  if (res.destroyed || res.socket?.destroyed === true) stop()

  async function pump(): Promise<void> {
    if (pumping) {
      // A wake-up during a read: read once more when this one ends, so nothing waits for the poll.
      again = true
      return
    }
    pumping = true
    try {
      do {
        again = false
        for (;;) {
          const rows = await deps.reader.rows(tenantId, cursor, Number.MAX_SAFE_INTEGER, pageSize)
          if (rows.length > 0 && deps.stillAuthorized) {
            // Cannot tell (a store blip): nothing is delivered; the next wake-up or poll asks again.
            const ok = await deps.stillAuthorized().catch(() => null)
            if (stopped || ok === null) return
            if (!ok) {
              res.end()
              stop()
              return
            }
          }
          for (const r of rows) {
            if (stopped) return
            const flushed = res.write(
              `id: ${r.seq}\nevent: receipt\ndata: ${receiptJsonFromStored(r.body, r.hash)}\n\n`,
            )
            cursor = r.seq
            if (!flushed) await drainedOrClosed(res)
          }
          if (rows.length < pageSize || stopped) break
        }
      } while (again && !stopped)
    } catch (err) {
      // The next wake-up or poll retries from the same cursor.
      if (!stopped) deps.logger.warn({ err }, 'receipt stream read failed')
    } finally {
      pumping = false
    }
  }

  void pump()
  return {
    close() {
      if (!stopped) res.end()
      stop()
    },
    done,
  }
}

/**
 * Resolves when the socket drains or closes, leaving no listener behind: a long stream to a
 * slow reader waits many times, and a `close` listener left per wait would pile up.
 */
function drainedOrClosed(res: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      res.off('drain', done)
      res.off('close', done)
      resolve()
    }
    res.on('drain', done)
    res.on('close', done)
  })
}
