import type { IncomingMessage } from 'node:http'
import type { Writable } from 'node:stream'
import type { Barred } from '../core/evaluate.js'

/**
 * A write abandoned before its last byte went upstream: its key was barred (`barred`), or its
 * standing could not be read (null: the gate fails closed), while its body was still arriving.
 */
export class BarredBeforeBodyEnd extends Error {
  constructor(readonly barred: Barred | null) {
    super(
      barred ? `barred before the body ended: ${barred.reason}` : 'standing unreadable before the body ended',
    )
  }
}

/**
 * For a write decided before its whole body had arrived. A write is decided on its headers, and
 * an agent can send them, have the write allowed, and send the body after a revoke or the kill
 * switch has returned: the upstream then ran it, with the injected credential, as late as the
 * agent chose (found in review, 10 s after a revoke). So the body is streamed upstream but its
 * last chunk is held until the key's standing has been read again: barred, the upstream request
 * is destroyed with a `BarredBeforeBodyEnd` before it is complete (a server does not run a
 * request whose body never ended), and the forward's error handler answers the agent.
 *
 * Like sendReadBody, an own `pipe` over Readable#pipe: http-proxy pipes the request into the
 * upstream request (`(options.buffer || req).pipe(proxyReq)`, test/unit/buffered-body.test.ts).
 */
export function holdBodyEnd(req: IncomingMessage, standing: () => Promise<Barred | null>): void {
  req.pipe = (<T extends NodeJS.WritableStream>(destination: T): T => {
    const out = destination as unknown as Writable
    // The upstream gets the request's headers at once, as it would from a pipe's first chunk (a
    // server may answer them, a 401 say, before the body).
    ;(destination as unknown as { flushHeaders?: () => void }).flushHeaders?.()
    let held: Buffer | null = null
    req.on('data', (chunk: Buffer) => {
      // An upstream that answered early and closed takes nothing more (pipe would unpipe).
      if (out.destroyed) return
      if (held && !out.write(held)) {
        req.pause()
        out.once('drain', () => req.resume())
      }
      held = chunk
    })
    req.once('end', () => {
      standing().then(
        (barred) => {
          if (out.destroyed) return
          if (barred) out.destroy(new BarredBeforeBodyEnd(barred))
          else if (held) out.end(held)
          else out.end()
        },
        () => {
          if (!out.destroyed) out.destroy(new BarredBeforeBodyEnd(null))
        },
      )
    })
    return destination
  }) as IncomingMessage['pipe']
}
