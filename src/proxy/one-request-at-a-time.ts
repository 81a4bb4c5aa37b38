import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Socket } from 'node:net'

type Handler = (req: IncomingMessage, res: ServerResponse) => void

const kTurns = Symbol('writegate.turns')

/** A connection's requests after the one being handled, in the order they came. */
interface Turns {
  busy: boolean
  waiting: (() => void)[]
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
    const socket = req.socket as Socket & { [kTurns]?: Turns }
    let turns = socket[kTurns]
    if (turns === undefined) {
      turns = { busy: false, waiting: [] }
      socket[kTurns] = turns
    }
    const own = turns
    const run = () => {
      res.once('close', () => {
        const next = own.waiting.shift()
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
    if (own.busy) own.waiting.push(run)
    else {
      own.busy = true
      run()
    }
  }
}
