/** postgres.js's own codes for a connection that closed, ended, was destroyed or never opened in time. */
const DRIVER_CODES = new Set([
  'CONNECTION_CLOSED',
  'CONNECTION_ENDED',
  'CONNECTION_DESTROYED',
  'CONNECT_TIMEOUT',
])

/** Socket errors: the driver passes them to the queries waiting on that connection. */
const SOCKET_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
])

/**
 * SQLSTATEs of a server that is going away or cannot take the query now: class 08 (connection
 * exception), an administrator's or a crash's shutdown and "cannot connect now" (57P01–57P03),
 * too many connections (53300), a read-only transaction (25006: a standby, mid-failover), and
 * a transaction Postgres ended for sitting idle (25P03: the process stalled inside it).
 */
const UNAVAILABLE_SQLSTATES = new Set(['57P01', '57P02', '57P03', '53300', '25006', '25P03'])

/**
 * Whether an error means the database could not be reached or dropped the connection, so the
 * request failed for a reason of the service's, not the client's, and may be retried: a 503,
 * not a 500. A socket error counts only when the driver handed it to a query (it then carries
 * the query), so an upstream's ECONNREFUSED is never taken for the database's.
 */
export function isDatabaseUnavailable(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false
  const code = (err as { code?: unknown }).code
  if (typeof code !== 'string') return false
  if (DRIVER_CODES.has(code)) return true
  if (SOCKET_CODES.has(code)) return 'query' in err
  if ((err as { name?: unknown }).name !== 'PostgresError') return false
  // 08P01 (protocol violation) is in class 08 but is a bug on our side, not an outage.
  return (code.startsWith('08') && code !== '08P01') || UNAVAILABLE_SQLSTATES.has(code)
}
