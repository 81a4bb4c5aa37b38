import type { IncomingMessage } from 'node:http'

export class BodyTooLarge extends Error {}
/** The client went away (a reset, a close) before its whole body arrived. */
export class BodyAborted extends Error {}

/**
 * Reads a request body into memory, refusing anything over `limit` bytes (declared or
 * actual). An oversized body is drained, not read, so the socket can still be answered.
 * `wanted` runs once the declared size is known to fit, before any byte is read: where an
 * `Expect: 100-continue` is answered, so a body refused on its declared size is never asked for.
 */
export function readBody(req: IncomingMessage, limit: number, wanted?: () => void): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    // A request that went away before we got to it neither ends nor fails again.
    if (req.destroyed && !req.complete) {
      reject(new BodyAborted('request closed before its body was read'))
      return
    }
    const declared = Number(req.headers['content-length'])
    if (Number.isFinite(declared) && declared > limit) {
      reject(new BodyTooLarge())
      return
    }
    wanted?.()
    const chunks: Buffer[] = []
    let size = 0
    req.on('data', (chunk: Buffer) => {
      size += chunk.length
      if (size > limit) {
        req.removeAllListeners('data')
        req.resume()
        reject(new BodyTooLarge())
        return
      }
      chunks.push(chunk)
    })
    req.once('end', () => resolve(Buffer.concat(chunks)))
    req.once('error', reject)
    req.once('close', () => {
      if (!req.complete) reject(new BodyAborted('request closed before its body was read'))
    })
  })
}

/** A client's socket failure, for a log line: its code or message, never a stack (it is no fault of ours). */
export function causeOf(err: unknown): string {
  const e = err as NodeJS.ErrnoException | undefined
  return e?.code ?? e?.message ?? String(err)
}
