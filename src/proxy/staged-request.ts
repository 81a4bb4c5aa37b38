import type { IncomingMessage } from 'node:http'

export class BodyTooLarge extends Error {}

/** Reads a request body into memory, refusing anything over `limit` bytes. */
export function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const declared = Number(req.headers['content-length'] ?? 0)
    if (declared > limit) {
      reject(new BodyTooLarge())
      return
    }
    const chunks: Buffer[] = []
    let size = 0
    req.on('data', (chunk: Buffer) => {
      size += chunk.length
      if (size > limit) {
        req.removeAllListeners('data')
        reject(new BodyTooLarge())
        return
      }
      chunks.push(chunk)
    })
    req.once('end', () => resolve(Buffer.concat(chunks)))
    req.once('error', reject)
  })
}

/**
 * The pseudo-tool a proxy-staged action replays on approval: the exact upstream request
 * (method, path, content type and body), sent to the system's fixed origin.
 */
export const HTTP_REPLAY_TOOL = '@http'

export interface HttpReplayParams {
  method: string
  path: string
  contentType: string | null
  /** base64 of the exact body bytes. */
  body: string
  bodySha256: string
  [key: string]: unknown
}
