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
const IS_HOP_BY_HOP = new Set(HOP_BY_HOP)

/**
 * Never removed for being named by a Connection header: how the message's body is delimited
 * (Transfer-Encoding is left to Node, which re-frames the body for the next hop), how it is to be
 * read, and where it goes. A `Connection: content-length` that dropped the length would send the
 * body upstream unframed, to be read there as a request of its own; a `Connection: content-type`
 * would turn the JSON the gate read into what Rack then reads as a form.
 */
const NEVER_NAMED = new Set([
  'transfer-encoding',
  'content-length',
  'host',
  'content-type',
  'content-encoding',
])

/** The header names a Connection header lists, but those NEVER_NAMED, lower-cased. */
function namedBy(connection: string | string[] | undefined): string[] {
  // What most clients send names no other header (Keep-Alive is hop-by-hop already).
  if (connection === undefined || connection === 'keep-alive') return []
  const names: string[] = []
  for (const part of String(connection).split(',')) {
    const h = part.trim().toLowerCase()
    if (h !== '' && !NEVER_NAMED.has(h)) names.push(h)
  }
  return names
}

/**
 * Removes a response's hop-by-hop headers, including every header its Connection header names.
 * Transfer-Encoding is left to Node, which re-frames the body for the next hop. They are set to
 * undefined rather than deleted: http-proxy copies only headers that have a value, and a
 * deleted key turns the headers object into a slow dictionary for everything that reads it.
 */
export function blankHopByHop(headers: IncomingHttpHeaders): void {
  const connection = headers.connection
  for (const h of HOP_BY_HOP) if (headers[h] !== undefined) headers[h] = undefined
  if (connection === undefined) return
  for (const h of namedBy(connection)) if (headers[h] !== undefined) headers[h] = undefined
}

/**
 * The headers a request goes upstream with, as a new object: the agent's, less the hop-by-hop
 * ones (and those its Connection header names), less `stripped` and `also`, plus `set`.
 * Built in one pass rather than by deleting from the agent's (a request's headers cannot be
 * blanked: Node refuses an outgoing header set to undefined), so the object http-proxy copies
 * for the upstream request keeps a fast shape.
 */
export function forwardedHeaders(
  headers: IncomingHttpHeaders,
  stripped: ReadonlySet<string>,
  set: Readonly<Record<string, string | null>>,
  also?: string,
): IncomingHttpHeaders {
  const named = namedBy(headers.connection)
  const out: IncomingHttpHeaders = {}
  for (const name in headers) {
    // CGI-style servers (Rack, PHP) read `X_HTTP_METHOD_OVERRIDE` as `X-HTTP-Method-Override`:
    // a name is judged as the dashes it may become (rare: most names hold no underscore).
    const as = name.includes('_') ? name.replaceAll('_', '-') : name
    if (IS_HOP_BY_HOP.has(as) || stripped.has(as) || as === also) continue
    if (named.length > 0 && named.includes(as)) continue
    // Nor may the agent's own spelling of a header the proxy sets (the injected credential) ride along.
    if (as !== name && Object.hasOwn(set, as)) continue
    const value = headers[name]
    if (value !== undefined) out[name] = value
  }
  for (const name in set) {
    const value = set[name]
    if (value !== null && value !== undefined) out[name] = value
  }
  return out
}
