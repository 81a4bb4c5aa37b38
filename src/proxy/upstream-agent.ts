import { Agent as HttpAgent } from 'node:http'
import { Agent as HttpsAgent } from 'node:https'
import type { LookupFunction, Socket } from 'node:net'
import type { Duplex } from 'node:stream'
import { createSecureContext } from 'node:tls'

/** The code on the error a forwarded request fails with when its upstream fell silent. */
export const UPSTREAM_TIMEOUT_CODE = 'UPSTREAM_TIMEOUT'

export class UpstreamSilent extends Error {
  readonly code = UPSTREAM_TIMEOUT_CODE
  constructor(ms: number) {
    super(`upstream silent for ${ms} ms`)
  }
}

const KEEP_ALIVE_MSECS = 1000
const POOL = {
  keepAlive: true,
  keepAliveMsecs: KEEP_ALIVE_MSECS,
  maxSockets: 256,
  maxFreeSockets: 64,
  scheduling: 'lifo' as const,
}

/**
 * Keep-alive connections to one upstream origin, each cut after `silenceMs` without traffic:
 * while connecting, while waiting for the response, mid-body, or idle in the pool.
 *
 * The timer is armed once per connection and refreshed by its traffic. http-proxy's
 * `proxyTimeout` (ClientRequest#setTimeout) instead re-arms the socket's timer twice per
 * request, adds and removes listeners each time, and leaves the connect phase untimed; Node's
 * own agent, when a socket goes back to the pool, would set its timeout to the agent's (none).
 */
export function createUpstreamAgent(
  origin: URL,
  silenceMs: number,
  caBundle?: string,
  /** How the upstream's name is resolved (publicOnlyLookup for a `publicOnly` system); Node's default if absent. */
  lookup?: LookupFunction,
): HttpAgent {
  // Agents hand out net.Socket (tls.TLSSocket for https); Node's typings say Duplex.
  const cutWhenSilent = (duplex: Duplex | null | undefined) => {
    const socket = duplex as Socket | null | undefined
    if (!socket) return
    socket.setTimeout(silenceMs)
    socket.on('timeout', () => socket.destroy(new UpstreamSilent(silenceMs)))
  }
  // Node's keepSocketAlive but for one thing: the socket keeps its silence timeout in the pool.
  // (Node's would also shorten it to an upstream's Keep-Alive hint, had the agent a timeout of
  // its own; the proxy strips that hop-by-hop header before the socket is freed anyway.)
  const keepSocketAlive = (duplex: Duplex) => {
    const socket = duplex as Socket
    socket.setKeepAlive(true, KEEP_ALIVE_MSECS)
    socket.unref()
    return true
  }
  // https is verified (Node's default: rejectUnauthorized, SNI from the host), against the
  // system's caBundle when it has one, else the trust store; never downgraded to http.
  const https = origin.protocol === 'https:'
  const agent = https ? new HttpsAgent(POOL) : new HttpAgent(POOL)
  // The bundle is parsed once, into one secure context every connection of this agent shares.
  // Given as the agent's `ca` option instead, Node would parse it again for every new connection,
  // and put its text (kilobytes) into the pool key the agent builds, hashes and compares for every
  // request (Agent#getName): ≈ 5 µs of every forwarded write, measured in bench:tls.
  const secureContext = https && caBundle ? createSecureContext({ ca: caBundle }) : undefined
  // Both are documented as overridable; the agent calls them as its own methods.
  const open = agent.createConnection.bind(agent) as (...args: unknown[]) => Duplex
  const extra = { ...(secureContext ? { secureContext } : {}), ...(lookup ? { lookup } : {}) }
  const hasExtra = secureContext !== undefined || lookup !== undefined
  agent.createConnection = (options, ...rest) => {
    const socket = open(hasExtra ? { ...options, ...extra } : options, ...rest)
    cutWhenSilent(socket)
    return socket
  }
  agent.keepSocketAlive = keepSocketAlive
  return agent
}
