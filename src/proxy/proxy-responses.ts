import type { ServerResponse } from 'node:http'
import type { ErrorDef } from '../core/errors.js'

/** JSON answers the proxy gives an agent (contract §8); the connection is closed when a body was left unread. */
export function sendJson(
  res: ServerResponse,
  status: number,
  body: Record<string, unknown>,
  extraHeaders: Record<string, string> = {},
): void {
  if (res.headersSent) {
    res.destroy()
    return
  }
  const text = JSON.stringify(body)
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
    'cache-control': 'no-store',
    ...extraHeaders,
  })
  res.end(text)
}

/** A refusal from the error registry, as gate-proxy answers it (contract §8 shapes). */
export function sendRefusal(
  res: ServerResponse,
  def: ErrorDef,
  error: string,
  extra: Record<string, unknown> = {},
): void {
  sendJson(
    res,
    def.status,
    { error, code: def.code, decision: 'DENY', reason: def.code, ...extra },
    { connection: 'close' },
  )
}
