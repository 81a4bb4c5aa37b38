import { EventSource } from 'eventsource'

export interface StreamedReceipt {
  id: number
  seq: number
  receiptId: string
  receipt: Record<string, unknown>
}

export interface StreamClient {
  readonly received: StreamedReceipt[]
  readonly errors: unknown[]
  /** Resolves once the stream is open. */
  readonly opened: Promise<void>
  close(): void
}

/**
 * A real SSE client (the `eventsource` package) on a real listening server. The API key
 * goes in the Authorization header; `lastEventId` is sent as Last-Event-ID, as a browser
 * does when it reconnects.
 */
export function openStream(
  base: string,
  apiKey: string,
  opts: { since?: number; lastEventId?: number } = {},
): StreamClient {
  const url = new URL('/v1/receipts/stream', base)
  if (opts.since !== undefined) url.searchParams.set('since', String(opts.since))
  const received: StreamedReceipt[] = []
  const errors: unknown[] = []
  const es = new EventSource(url, {
    fetch: (input, init) =>
      fetch(input, {
        ...init,
        headers: {
          ...(init?.headers ?? {}),
          authorization: `Bearer ${apiKey}`,
          ...(opts.lastEventId !== undefined ? { 'last-event-id': String(opts.lastEventId) } : {}),
        },
      }),
  })
  const opened = new Promise<void>((resolve) => es.addEventListener('open', () => resolve(), { once: true }))
  es.addEventListener('receipt', (e) => {
    const receipt = JSON.parse(e.data) as Record<string, unknown>
    received.push({
      id: Number(e.lastEventId),
      seq: receipt.seq as number,
      receiptId: receipt.receiptId as string,
      receipt,
    })
  })
  es.addEventListener('error', (e) => errors.push(e))
  return {
    received,
    errors,
    opened,
    close: () => es.close(),
  }
}

export { waitFor } from './wait.js'
