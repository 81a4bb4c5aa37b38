import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Socket } from 'node:net'

type Handler = (req: IncomingMessage, res: ServerResponse) => void

const kTurns = Symbol('writegate.turns')

/** A connection's requests after the one being handled, in the order they came. */
interface Turns {
  busy: boolean
  waiting: (() => void)[]
  /** Reading from the connection stopped until fewer requests wait. */
  paused: boolean
}

/**
 * Requests a connection may have waiting before the proxy stops reading it. Node parses every
 * pipelined request it has read, and stops reading only while answers wait to be written, which
 * waiting requests have none of: 150,000 GETs in one write (6.5 MB) held 284 MB of heap (found
 * in review). Past this the connection is paused as Node pauses it for unwritten answers; what
 * one read brought in is still parsed, so the queue stays within a read of it. Reading resumes
 * once half of it has been answered.
 */
export const MAX_WAITING = 32

/**
 * Node's own pause of a server connection (`_http_server.js`: `socket._paused`, then its parser
 * after the chunk in hand): a plain `socket.pause()` is undone by each request's `readStart`.
 * test/unit/one-request-at-a-time.test.ts fails the day Node reads these otherwise.
 */
type ServerSocket = Socket & { _paused?: boolean; parser?: { resume(): void } | null }
function pauseReading(socket: ServerSocket): void {
  socket._paused = true
  socket.pause()
}
function resumeReading(socket: ServerSocket): void {
  if (!socket._paused) return
  socket._paused = false
  socket.parser?.resume()
  socket.resume()
}

/**
 * Pipelined requests on one connection, handled one at a time. Node emits 'request' for each as
 * soon as it is parsed, before the answers ahead of it are written. A refusal closes its
 * connection (`connection: close`), and a write pipelined behind it was still decided and
 * forwarded, its answer never read by the agent, which would then retry it (found in review).
 * Each request now starts once the answer ahead of it is done; if that answer closed the
 * connection, the requests behind it are dropped undecided, as Node drops their answers.
 * A connection with one request at a time (every agent but a pipelining one) pays one listener.
 */
export function oneRequestAtATime(handle: Handler): Handler {
  return (req, res) => {
    const socket = req.socket as ServerSocket & { [kTurns]?: Turns }
    let turns = socket[kTurns]
    if (turns === undefined) {
      turns = { busy: false, waiting: [], paused: false }
      socket[kTurns] = turns
    }
    const own = turns
    const run = () => {
      res.once('close', () => {
        const next = own.waiting.shift()
        if (own.paused && own.waiting.length <= MAX_WAITING / 2) {
          own.paused = false
          resumeReading(socket)
        }
        if (next === undefined) own.busy = false
        else next()
      })
      // The answer ahead said close, or the client went: nobody reads an answer to this one.
      if (socket.destroyed || !socket.writable) {
        res.destroy()
        return
      }
      handle(req, res)
    }
    if (own.busy) {
      own.waiting.push(run)
      // Again each time: Node resumes the connection itself once an answer is written.
      if (own.waiting.length >= MAX_WAITING) {
        own.paused = true
        pauseReading(socket)
      }
    } else {
      own.busy = true
      run()
    }
  }
}
