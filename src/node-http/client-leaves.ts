import type { ServerResponse } from 'node:http'

/**
 * Aborted when the client's connection closes before its answer was written: a handler that
 * reads a whole audit log (seconds of CPU for millions of receipts) stops with its client instead
 * of finishing work nobody will receive (found in review: a client that asked and hung up, again
 * and again, kept the shared control plane busy).
 */
export function clientLeaves(res: ServerResponse): AbortSignal {
  const controller = new AbortController()
  res.once('close', () => {
    if (!res.writableFinished) controller.abort(new ClientLeft())
  })
  return controller.signal
}

/** The reason such a signal carries: answered with nothing, since no one is there to read it. */
export class ClientLeft extends Error {
  constructor() {
    super('the client closed its connection before the answer')
    this.name = 'ClientLeft'
  }
}
