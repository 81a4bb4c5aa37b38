import type { IncomingMessage } from 'node:http'

/**
 * Makes a request whose body was already read whole (to decide on it, or to stage it) send that
 * body upstream in one write, through http-proxy.
 *
 * http-proxy sends a body by piping `options.buffer`, else the request itself, into the upstream
 * request (passes/web-incoming.js: `(options.buffer || req).pipe(proxyReq)`). Giving it
 * `{ buffer: Readable.from(body) }` costs, on every gated write, per-request options merged over
 * the server's, a stream, and a pipe's eight listeners on each side. The request's own `pipe`
 * instead ends the upstream request with the bytes. test/unit/buffered-body.test.ts sends bodies
 * through a real http-proxy server and fails the day it takes a body some other way.
 */
export function sendReadBody(req: IncomingMessage, body: Buffer): void {
  // An own property, over Readable#pipe: the request's stream was consumed, so nothing is lost.
  req.pipe = ((destination: NodeJS.WritableStream) => {
    destination.end(body)
    return destination
  }) as IncomingMessage['pipe']
}
