import {
  createServer,
  type Agent as HttpAgent,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http'
import type { Server as NetServer } from 'node:net'
import type { TLSSocket } from 'node:tls'
import type { Clock } from '../core/clock.js'
import { ERRORS } from '../core/errors.js'
import { standingOf } from '../core/evaluate.js'
import type { CompiledSnapshot } from '../core/snapshot.js'
import type { Environment } from '../core/verbs.js'
import type { GatedWrites } from '../gate/gated-write.js'
import type { SnapshotCache } from '../gate/snapshot-cache.js'
import { guardServer } from '../node-http/guarded-server.js'
import type { Logger } from '../observability/logger.js'
import type { Metrics } from '../observability/metrics.js'
import { createConnectTunnels } from './connect-tunnels.js'
import { createCredentialInjection } from './credential-injection.js'
import { oneRequestAtATime } from './one-request-at-a-time.js'
import type { ProxyIdentity } from './proxy-identity.js'
import { sendRefusal } from './proxy-responses.js'
import { createRequestHandler } from './request-handler.js'
import type { LocalSystems } from './request-plan.js'
import { createServedClients } from './served-clients.js'
import type { SystemCredentials } from './system-credentials.js'
import type { TlsInterception } from './tls-interception.js'
import { createUpstreamForwarding } from './upstream-forwarding.js'
import { createUpstreamProxyPool, type UpstreamConnection } from './upstream-proxy-pool.js'

export { MAX_REWRITTEN_ANSWER_BYTES, type UpstreamConnection } from './upstream-proxy-pool.js'
export { GRANT_HEADER, RECEIPT_HEADER } from './writegate-headers.js'

/** How long close() lets in-flight requests and tunnels finish before cutting their connections. */
const CLOSE_GRACE_MS = 2000

export interface GateProxyDeps {
  writes: GatedWrites
  snapshots: SnapshotCache
  /** Who the proxy acts as; null until its API key has been resolved. */
  identity: ProxyIdentity
  /** Systems of a deprecated route table file, for the proxy's tenant. */
  local: (tenantId: string) => LocalSystems
  /** Hosts (or host:port) a CONNECT tunnel, or a connection on the TLS port, may reach, ungated. */
  passthrough: ReadonlySet<string>
  /** Transparent mode: the port a pass-through connection on the TLS port is tunnelled to. */
  tlsPassthroughPort?: number
  /** Keep-alive connections to an upstream origin. */
  agentFor: (origin: URL, how: UpstreamConnection) => HttpAgent
  /** Serve writes to clients that reach the proxy at a non-loopback address (proxy.remoteClients). */
  remoteClients?: boolean
  /** TLS interception of CONNECTs to enrolled https upstreams; null without an interception CA. */
  interception?: TlsInterception | null
  credentials: SystemCredentials
  /**
   * Reaches the hot store (a read of the tenant's version): the snapshot is served from the
   * process's cache, so without this a proxy whose Redis was gone said ready while it refused
   * every write (found in review).
   */
  hotStoreReachable: (tenantId: string) => Promise<unknown>
  /** The tenant's snapshot version in the hot store now (the cache may not have heard of a bump). */
  hotVersion: (tenantId: string) => Promise<number | null>
  clock: Clock
  logger: Logger
  metrics: Metrics
  environment: Environment | null
  maxStagedBodyBytes: number
  /** MCP and GraphQL request bodies are read whole to be decided, up to this size. */
  maxInspectedBodyBytes: number
}

export interface Readiness {
  ready: boolean
  /** Why not: `no_key`, `unknown_key`, `hot_store_unreachable`, `no_snapshot`, `no_systems`. */
  reason?: string
  /** Systems whose writes are refused with 503 credential_unavailable, and why. */
  credentialsUnavailable?: { systemId: string; problem: string }[]
}

export interface GateProxy {
  readonly server: Server
  listen(port: number, host: string): Promise<number>
  /** Transparent mode's TLS port (with an interception CA); resolves the port it listens on. */
  listenTls(port: number, host: string): Promise<number>
  /** Ready once the proxy knows its key and holds its tenant's snapshot, which enrols a system. */
  readiness(): Promise<Readiness>
  close(): Promise<void>
}

/**
 * gate-proxy: a write reaches its upstream only when the gate says ALLOW and its receipt
 * is durable. Every other outcome answers the agent without contacting the upstream.
 */
export function createGateProxy(deps: GateProxyDeps): GateProxy {
  const { logger, metrics } = deps
  const upstreams = createUpstreamProxyPool({ agentFor: deps.agentFor, logger, metrics })
  const { forward } = createUpstreamForwarding({
    logger,
    proxyOf: upstreams.proxyOf,
    clientWentAway: upstreams.clientWentAway,
  })
  const { credentialFor } = createCredentialInjection({ credentials: deps.credentials, metrics })
  const { servesClient } = createServedClients({ remoteClients: deps.remoteClients })

  let tlsServer: NetServer | undefined
  let closing = false
  /**
   * A TLS connection whose handshake just completed, served as any other connection; not once
   * the proxy is closing (found in review: one still handshaking when close() resolved was then
   * served, its write decided and forwarded).
   */
  const handOver = (tls: TLSSocket) => {
    if (closing) tls.destroy()
    else server.emit('connection', tls)
  }
  const { onConnect, systemsOn, interceptable, noSystemAt, splice, tunnels } = createConnectTunnels({
    snapshots: deps.snapshots,
    identity: deps.identity,
    local: deps.local,
    passthrough: deps.passthrough,
    interception: deps.interception,
    logger,
    metrics,
    servesClient,
    handOver,
  })
  const { handle } = createRequestHandler({
    writes: deps.writes,
    identity: deps.identity,
    local: deps.local,
    interception: deps.interception,
    environment: deps.environment,
    maxStagedBodyBytes: deps.maxStagedBodyBytes,
    maxInspectedBodyBytes: deps.maxInspectedBodyBytes,
    clock: deps.clock,
    logger,
    metrics,
    // Looked up on each request: the proxy's readiness may be replaced on the object returned.
    readiness: () => api.readiness(),
    servesClient,
    credentialFor,
    forward,
    async standing(tenantId, keyId) {
      // Read from the hot store's version, not only the cache: a revoke whose invalidation was
      // lost is still seen, as the commit's version check sees it.
      const version = await deps.hotVersion(tenantId)
      if (version !== null) deps.snapshots.invalidate(tenantId, version)
      let snap = await deps.snapshots.get(tenantId)
      // A load already under way when the version was read may bring an older snapshot.
      if (snap && version !== null && snap.version < version) {
        deps.snapshots.invalidate(tenantId, version)
        snap = await deps.snapshots.get(tenantId)
      }
      if (!snap || (version !== null && snap.version < version)) throw new Error('no current snapshot')
      return standingOf(snap, keyId)
    },
  })

  const onRequest = oneRequestAtATime((req: IncomingMessage, res: ServerResponse) => {
    handle(req, res).catch((err) => {
      logger.error({ err }, 'proxy request failed')
      if (req.socket.destroyed) return // no one to tell
      sendRefusal(res, ERRORS.gateUnavailable, ERRORS.gateUnavailable.message)
    })
  })
  // Every socket has an 'error' listener for its whole life, CONNECT's included (guarded-server.ts).
  const server = guardServer(createServer(onRequest), logger, { connect: 'handled' })
  // Expect: 100-continue is answered by the proxy once it wants the body (continueIfExpected).
  server.on('checkContinue', onRequest)
  server.on('connect', onConnect)

  const api: GateProxy = {
    server,
    async listen(port, host) {
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject)
        server.listen(port, host, () => resolve())
      })
      const addr = server.address()
      return typeof addr === 'object' && addr ? addr.port : port
    },
    async listenTls(port, host) {
      const interception = deps.interception
      if (!interception) throw new Error('no interception CA: proxy.tls.caCertFile and caKeyFile')
      // The SNI names the host; the port the client meant is not known here (redirected from
      // 443): an enrolled https host is intercepted, a pass-through one tunnelled to passthroughPort.
      const passthroughPort = deps.tlsPassthroughPort ?? 443
      tlsServer = interception.tlsPort(
        servesClient,
        async (h) => {
          const systems = await systemsOn(h)
          if (systems && interceptable(systems, null)) return 'intercept'
          if (!deps.passthrough.has(h) && !deps.passthrough.has(`${h}:${passthroughPort}`)) return 'refuse'
          if (!systems) return 'unavailable'
          return noSystemAt(systems, passthroughPort) ? 'tunnel' : 'refuse'
        },
        handOver,
        (socket, hello, h) => {
          if (closing) return socket.destroy()
          tunnels.add(socket)
          socket.once('close', () => tunnels.delete(socket))
          deps.metrics.tlsPassedThrough()
          splice(socket, hello, h, passthroughPort)
        },
      )
      const listening = tlsServer
      await new Promise<void>((resolve, reject) => {
        listening.once('error', reject)
        listening.listen(port, host, () => resolve())
      })
      const addr = listening.address()
      return typeof addr === 'object' && addr ? addr.port : port
    },
    async readiness() {
      const id = deps.identity.status()
      if (id.kind !== 'resolved') return { ready: false, reason: id.kind }
      let snap: CompiledSnapshot | null
      try {
        await deps.hotStoreReachable(id.ref.tenantId)
        snap = await deps.snapshots.get(id.ref.tenantId)
      } catch {
        return { ready: false, reason: 'hot_store_unreachable' }
      }
      if (!snap) return { ready: false, reason: 'no_snapshot' }
      const local = deps.local(id.ref.tenantId)
      const systems = [...snap.systems(), ...local.all()].map((s) => s.record)
      if (systems.length === 0) return { ready: false, reason: 'no_systems' }
      const credentialsUnavailable = systems.flatMap((s) => {
        const c = deps.credentials.get(s)
        return c && !c.ok ? [{ systemId: s.systemId, problem: c.problem }] : []
      })
      return credentialsUnavailable.length > 0 ? { ready: true, credentialsUnavailable } : { ready: true }
    },
    async close() {
      closing = true
      // Idle keep-alive connections go at once; a request still in flight (a slow upstream, a
      // long upload) gets a short grace, then its connection is cut so shutdown cannot hang.
      const closed = new Promise<void>((resolve) => server.close(() => resolve()))
      tlsServer?.close()
      server.closeIdleConnections()
      const grace = setTimeout(() => {
        server.closeAllConnections()
        for (const socket of tunnels) socket.destroy()
      }, CLOSE_GRACE_MS)
      await closed
      clearTimeout(grace)
      upstreams.close()
    },
  }
  return api
}
