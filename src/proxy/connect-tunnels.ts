import type { IncomingMessage } from 'node:http'
import { connect, type Socket } from 'node:net'
import type { TLSSocket } from 'node:tls'
import type { SystemRecord } from '../core/enrolled-system.js'
import { ERRORS, type ErrorDef } from '../core/errors.js'
import { refusalAnswer } from '../gate/http-answer.js'
import type { SnapshotCache } from '../gate/snapshot-cache.js'
import { endAndClose, rawJsonAnswer } from '../node-http/guarded-server.js'
import type { Logger } from '../observability/logger.js'
import type { Metrics } from '../observability/metrics.js'
import type { ProxyIdentity } from './proxy-identity.js'
import type { LocalSystems } from './request-plan.js'
import type { TlsInterception } from './tls-interception.js'

export interface ConnectTunnelsDeps {
  snapshots: SnapshotCache
  identity: ProxyIdentity
  /** Systems of a deprecated route table file, for the proxy's tenant. */
  local: (tenantId: string) => LocalSystems
  /** Hosts (or host:port) a CONNECT tunnel, or a connection on the TLS port, may reach, ungated. */
  passthrough: ReadonlySet<string>
  /** TLS interception of CONNECTs to enrolled https upstreams; null without an interception CA. */
  interception?: TlsInterception | null | undefined
  logger: Logger
  metrics: Metrics
  servesClient(socket: Socket): boolean
  /** An intercepted connection whose handshake completed, to be served as any other. */
  handOver(tls: TLSSocket): void
}

export interface ConnectTunnels {
  /** The HTTP server's 'connect' handler. */
  onConnect(req: IncomingMessage, socket: Socket, head: Buffer): void
  systemsOn(host: string): Promise<SystemRecord[] | null>
  interceptable(systems: SystemRecord[], port: number | null): boolean
  noSystemAt(systems: SystemRecord[], port: number): boolean
  splice(socket: Socket, head: Buffer, host: string, port: number, established?: string): void
  /** Open tunnels: CONNECT's, and those the TLS port passes through (gate-proxy.ts adds them). */
  readonly tunnels: Set<Socket>
}

/**
 * CONNECT: intercepted (to an enrolled https upstream), tunnelled opaque (a pass-through host
 * of no enrolled system), or refused; and the splicing of a pass-through connection to its host.
 */
export function createConnectTunnels(deps: ConnectTunnelsDeps): ConnectTunnels {
  const { logger, servesClient, handOver } = deps
  /** Sockets handed to the CONNECT handler: the HTTP server no longer tracks them, but close() waits for them. */
  const tunnels = new Set<Socket>()

  /**
   * The tenant's systems on a host, or null while the proxy cannot tell (no identity or
   * snapshot yet, Redis unreachable): a tunnel is then never opened on a guess.
   */
  async function systemsOn(host: string): Promise<SystemRecord[] | null> {
    const tenant = deps.identity.current()
    if (!tenant) return null
    const snap = await deps.snapshots.get(tenant.tenantId).catch(() => null)
    if (!snap) return null
    return [...snap.systemsOnHost(host), ...deps.local(tenant.tenantId).onHost(host)].map((s) => s.record)
  }

  /** An https system among them at `port` (any port when null): the host can be intercepted. */
  const interceptable = (systems: SystemRecord[], port: number | null) =>
    systems.some((s) => {
      const u = new URL(s.upstream)
      return u.protocol === 'https:' && (port === null || Number(u.port || 443) === port)
    })

  /**
   * Whether an opaque tunnel to `port` of a listed host may open: only if no system of the
   * tenant is served there. A pass-through entry never opens an ungated way to an enrolled
   * system, whatever the list says.
   */
  const noSystemAt = (systems: SystemRecord[], port: number) =>
    !systems.some((s) => {
      const u = new URL(s.upstream)
      return Number(u.port || (u.protocol === 'https:' ? 443 : 80)) === port
    })

  /** A CONNECT refused: answered, then closed (the socket is ours now, half-open until the client closes). */
  function refuseTunnel(socket: Socket, def: ErrorDef, error?: string): void {
    const { status, body } = refusalAnswer(def, {}, error)
    endAndClose(socket, rawJsonAnswer(status, body))
  }

  /**
   * CONNECT to an enrolled https upstream, with an interception CA: terminated here and every
   * request in it gated. Otherwise an opaque tunnel, refused unless the host is on the
   * ungated pass-through list and of no enrolled system.
   */
  function onConnect(req: IncomingMessage, socket: Socket, head: Buffer): void {
    // A tunnel inside an intercepted one would leave the host its certificate was minted for.
    if (deps.interception?.authorityOf(socket) !== undefined) {
      deps.metrics.tlsRefused('host_mismatch')
      refuseTunnel(socket, ERRORS.tunnelRefused, 'no tunnel inside an intercepted one')
      return
    }
    if (!servesClient(socket)) {
      refuseTunnel(socket, ERRORS.remoteClient)
      return
    }
    tunnels.add(socket)
    socket.once('close', () => tunnels.delete(socket))
    const authority = (req.url ?? '').toLowerCase()
    // host:port and nothing more: `host:443:1` named the host checked but is no authority (found
    // in review). An IPv6 literal has colons of its own, and is refused below as no host name.
    const [host, port, ...rest] = authority.split(':')
    const interception = deps.interception
    const listed =
      deps.passthrough.has(authority) || (host !== undefined && passesThrough(host, port ?? '443'))
    // Nothing to intercept and nothing listed: refused without asking the snapshot.
    if (!host || rest.length > 0 || !/^\d{1,5}$/.test(port ?? '443') || (!interception && !listed)) {
      refuseTunnel(socket, ERRORS.tunnelRefused)
      return
    }
    const portNumber = Number(port ?? 443)
    systemsOn(host)
      .then(async (systems) => {
        if (socket.destroyed) return
        if (systems && interception && interceptable(systems, portNumber)) {
          if (await interception.intercept(socket, head, host, portNumber, handOver)) return
          // outside_ca (counted there): an enrolled host is never tunnelled ungated instead.
          return refuseTunnel(
            socket,
            ERRORS.tunnelRefused,
            'the interception CA may not vouch for this enrolled host',
          )
        }
        if (!listed) return refuseTunnel(socket, ERRORS.tunnelRefused)
        if (!systems) return refuseTunnel(socket, ERRORS.gateUnavailable)
        if (!noSystemAt(systems, portNumber))
          return refuseTunnel(socket, ERRORS.tunnelRefused, 'an enrolled system is never tunnelled ungated')
        splice(socket, head, host, portNumber, 'HTTP/1.1 200 Connection Established\r\n\r\n')
      })
      .catch((err) => {
        logger.error({ err }, 'CONNECT routing failed')
        socket.destroy()
      })
  }

  /** Whether an opaque, ungated tunnel to `host:port` is allowed: the host (at 443) or host:port is on the list. */
  function passesThrough(host: string, port: string): boolean {
    return deps.passthrough.has(`${host}:${port}`) || (port === '443' && deps.passthrough.has(host))
  }

  /** Joins the agent's socket to `host:port`, bytes both ways, `head` (what the agent sent already) first. */
  function splice(socket: Socket, head: Buffer, host: string, port: number, established?: string): void {
    let connected = false
    const upstream = connect(port, host, () => {
      connected = true
      if (established) socket.write(established)
      if (head.length > 0) upstream.write(head)
      upstream.pipe(socket)
      socket.pipe(upstream)
      socket.resume()
    })
    const kill = () => {
      upstream.destroy()
      socket.destroy()
    }
    upstream.on('error', (err: NodeJS.ErrnoException) => {
      if (connected || socket.destroyed) return kill()
      // Never reached: counted, and a CONNECT is told so (found in review: it got no answer).
      // On the TLS port the client has sent its ClientHello and waits for TLS: it is closed.
      deps.metrics.tlsRefused('passthrough_unreachable')
      logger.debug({ host, port, code: err.code }, 'pass-through host unreachable')
      if (!established) return kill()
      upstream.destroy()
      refuseTunnel(socket, ERRORS.upstreamError, 'the pass-through host could not be reached')
    })
    socket.on('error', kill)
    socket.once('close', () => upstream.destroy())
  }

  return { onConnect, systemsOn, interceptable, noSystemAt, splice, tunnels }
}
