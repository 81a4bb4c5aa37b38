import { connect, type Socket } from 'node:net'

/**
 * How long a request to Postgres may go without a byte of its reply before its connection is
 * cut: past the API's 30-second handler deadline, and never reached by a healthy server, whose
 * statements here take milliseconds (a lock wait longer than this fails the request that waited).
 */
export const REPLY_DEADLINE_MS = 45_000

/** What the driver hands its `socket` option (postgres.js's parsed options). */
interface DriverSocketOptions {
  host: string[]
  port: number[]
  path?: string | false
  ssl?: unknown
}

/**
 * One watched connection: its requests without a ReadyForQuery yet, whether it waits for a byte
 * (`waiting`), and since when (the write that started the wait, or the last byte that came).
 */
interface Watched {
  socket: Socket
  outstanding: number
  waiting: boolean
  since: number
  /** The incoming message being skipped: its header bytes seen, then how much of its body is left. */
  header: number[]
  left: number
}

export interface ReplyWatchdog {
  /** postgres.js's `socket` option: a TCP connection to the server, watched once `arm` is called. */
  socket(options: DriverSocketOptions): Socket
  /** From now on, cut a connection whose reply is overdue (after migrations, which may wait on a lock). */
  arm(onCut: (info: { overdueMs: number; outstanding: number }) => void): void
  close(): void
}

/**
 * What the driver writes: how many ReadyForQuery it asks for (one per Query and per Sync), and
 * whether it waits for an answer at all. The first run of a statement on a connection goes out
 * as Parse, Describe and Flush, with no Sync: its answer is awaited all the same (found in
 * review). Only a Terminate expects nothing back.
 */
function requestsIn(chunk: Uint8Array, first: boolean): { ready: number; answered: boolean } {
  let ready = 0
  let answered = false
  let at = 0
  // The startup message has no type byte; its exchange ends with a ReadyForQuery too.
  if (first) {
    ready = 1
    answered = true
    at = chunk.length >= 4 ? new DataView(chunk.buffer, chunk.byteOffset).getInt32(0) : chunk.length
  }
  while (at + 5 <= chunk.length) {
    const type = chunk[at]
    if (type === 0x51 /* Q */ || type === 0x53 /* S */) ready++
    if (type !== 0x58 /* X */) answered = true
    at += 1 + new DataView(chunk.buffer, chunk.byteOffset + at + 1).getInt32(0)
  }
  return { ready, answered }
}

/** Reads what came, counting each ReadyForQuery ('Z'), across chunk boundaries. */
function readyIn(w: Watched, chunk: Uint8Array): number {
  let n = 0
  let at = 0
  while (at < chunk.length) {
    if (w.left > 0) {
      const skip = Math.min(w.left, chunk.length - at)
      w.left -= skip
      at += skip
      continue
    }
    w.header.push(chunk[at] as number)
    at++
    if (w.header.length === 5) {
      const [type, a, b, c, d] = w.header as [number, number, number, number, number]
      if (type === 0x5a /* Z */) n++
      w.left = ((a << 24) | (b << 16) | (c << 8) | d) - 4
      w.header = []
    }
  }
  return n
}

/**
 * A Postgres connection whose reply never comes (the server's answer lost with a frozen peer or
 * a broken middlebox, the connection still open) held its request for ever: the driver has no
 * query deadline, TCP keepalive does not fire while a request is unanswered, and the group
 * commit waited on it, answering every later check 503 until a restart (found in review). This
 * follows each connection's requests by the protocol's own framing (a Query or a Sync out owes a
 * ReadyForQuery back; any other message but a Terminate owes at least a byte) and cuts one that
 * has waited `deadlineMs` with no byte back;
 * the driver then fails what it held (CONNECTION_CLOSED) and opens a new connection. An idle
 * connection, a LISTEN one among them, has nothing outstanding and is never cut.
 *
 * Over TLS the driver runs its TLS on the socket's handle, out of this code's sight: such
 * connections are not watched (docs/architecture.md says so).
 */
export function createReplyWatchdog(deadlineMs = REPLY_DEADLINE_MS, tickMs = 1000): ReplyWatchdog {
  const watched = new Set<Watched>()
  let next = 0
  let timer: NodeJS.Timeout | undefined

  return {
    socket(options) {
      const i = next++ % Math.max(1, options.host.length)
      const host = options.host[i] ?? 'localhost'
      const port = options.port[i] ?? options.port[0] ?? 5432
      const socket = options.path ? connect(options.path) : connect({ host, port })
      // The driver names the TLS server by these when it secures a socket of ours.
      Object.assign(socket, { host, port })
      if (options.ssl) return socket
      const w: Watched = { socket, outstanding: 0, waiting: false, since: Date.now(), header: [], left: 0 }
      let first = true
      const write = socket.write
      socket.write = function (this: Socket, chunk: unknown, ...rest: unknown[]) {
        if (chunk instanceof Uint8Array) {
          const { ready, answered } = requestsIn(chunk, first)
          first = false
          w.outstanding += ready
          if (answered && !w.waiting) {
            w.waiting = true
            w.since = Date.now()
          }
        }
        return (write as (...args: unknown[]) => boolean).call(this, chunk, ...rest)
      } as Socket['write']
      socket.on('data', (chunk: Buffer) => {
        w.since = Date.now()
        w.outstanding = Math.max(0, w.outstanding - readyIn(w, chunk))
        // Answered as far as it asked: a Flush's answer came; a Sync still owes its ReadyForQuery.
        // Mid-message, the rest is owed too.
        w.waiting = w.outstanding > 0 || w.left > 0 || w.header.length > 0
      })
      watched.add(w)
      socket.once('close', () => watched.delete(w))
      return socket
    },
    arm(onCut) {
      if (timer) return
      timer = setInterval(() => {
        const now = Date.now()
        for (const w of watched) {
          const overdueMs = now - w.since
          if (w.waiting && overdueMs >= deadlineMs) {
            watched.delete(w)
            onCut({ overdueMs, outstanding: w.outstanding })
            w.socket.destroy()
          }
        }
      }, tickMs)
      timer.unref()
    },
    close() {
      if (timer) clearInterval(timer)
      timer = undefined
    },
  }
}
