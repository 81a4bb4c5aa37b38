const DIGITS = /^\d+$/

/**
 * Whether a Host header names the host (and, when known, the port; none means 443) an
 * intercepted tunnel was opened for. `at.host` is lower-case. Runs on every request in a
 * tunnel: string checks, no capture groups.
 */
export function sameAuthority(
  hostHeader: string | undefined,
  at: { host: string; port: number | null },
): boolean {
  const h = (hostHeader ?? '').toLowerCase()
  // An IPv6 literal is bracketed in a Host header (RFC 3986 §3.2.2): bare, its colons would read as a port.
  const name = at.host.includes(':') ? `[${at.host}]` : at.host
  if (!h.startsWith(name)) return false
  // What follows the host: nothing (port 443) or `:digits`.
  const rest = h.slice(name.length)
  if (rest === '') return at.port === null || at.port === 443
  if (rest.charCodeAt(0) !== 58 || !DIGITS.test(rest.slice(1))) return false
  return at.port === null || Number(rest.slice(1)) === at.port
}
