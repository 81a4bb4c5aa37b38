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
 */
export function stripHopByHop(headers: IncomingHttpHeaders): void {
  // Runs twice per forwarded request: plain loops, no arrays built when Connection is absent.
  const connection = headers.connection
  for (const h of HOP_BY_HOP) if (headers[h] !== undefined) delete headers[h]
  if (connection === undefined) return
  for (const part of String(connection).split(',')) {
    const h = part.trim().toLowerCase()
    if (h !== '' && h !== 'transfer-encoding') delete headers[h]
  }
}
