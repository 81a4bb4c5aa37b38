import type { IncomingHttpHeaders } from 'node:http'

/** Always connection-specific (RFC 9110 §7.6.1), plus the proxy-era Proxy-Connection. */
const HOP_BY_HOP = [
  'connection',
  'keep-alive',
  'proxy-connection',
  'te',
  'trailer',
  'upgrade',
  'proxy-authenticate',
  'proxy-authorization',
]

/**
 * Removes hop-by-hop headers, including every header the message's Connection header names.
 * Transfer-Encoding is left to Node, which re-frames the body for the next hop.
 *
 * `blank` sets them to undefined instead of deleting them: for a response on its way through
 * http-proxy, which copies only headers that have a value. `delete` turns the headers object
 * into a slow dictionary for everything that reads it afterwards; blanking keeps its shape.
 * A request's headers must be deleted: Node refuses an outgoing header set to undefined.
 */
export function stripHopByHop(headers: IncomingHttpHeaders, how: 'delete' | 'blank' = 'delete'): void {
  // Runs twice per forwarded request: plain loops, no arrays built when Connection is absent.
  const connection = headers.connection
  for (const h of HOP_BY_HOP) if (headers[h] !== undefined) drop(headers, h, how)
  if (connection === undefined) return
  for (const part of String(connection).split(',')) {
    const h = part.trim().toLowerCase()
    if (h !== '' && h !== 'transfer-encoding' && headers[h] !== undefined) drop(headers, h, how)
  }
}

function drop(headers: IncomingHttpHeaders, name: string, how: 'delete' | 'blank'): void {
  if (how === 'delete') delete headers[name]
  else headers[name] = undefined
}
