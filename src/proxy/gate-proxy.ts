import {
  type ClientRequest,
  createServer,
  type Agent as HttpAgent,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http'
import { connect, type Server as NetServer, type Socket } from 'node:net'
import { performance } from 'node:perf_hooks'
import type { Duplex } from 'node:stream'
import type { TLSSocket } from 'node:tls'
import { createProxyServer, type ProxyServer } from 'http-proxy-3'
import { stageHttpRequest } from '../actions/action-stager.js'
import { type Clock, nowSeconds } from '../core/clock.js'
import { type EchoNeedles, echoNeedles } from '../core/credential-echo.js'
import type { SystemRecord } from '../core/enrolled-system.js'
import { ERRORS, type ErrorDef } from '../core/errors.js'
import { standingOf } from '../core/evaluate.js'
import type { CompiledSnapshot } from '../core/snapshot.js'
import type { Environment } from '../core/verbs.js'
import type { GatedWrite, GatedWrites } from '../gate/gated-write.js'
import { httpAnswer, refusalAnswer } from '../gate/http-answer.js'
import type { SnapshotCache } from '../gate/snapshot-cache.js'
import { endAndClose, guardServer, rawJsonAnswer } from '../node-http/guarded-server.js'
import { BodyTooLarge, causeOf, readBody } from '../node-http/read-body.js'
import type { Logger } from '../observability/logger.js'
import type { Metrics } from '../observability/metrics.js'
import { PrivateAddressRefused } from '../systems/public-address-lookup.js'
import {
  BODY_READ_BY_EVERY_SERVER,
  carriesBody,
  frameBody,
  framingProblem,
  keepChunked,
  markChunked,
  SENDING_PASS,
} from './body-framing.js'
import { sendReadBody } from './buffered-body.js'
import type { CallProtocol } from './call-protocol.js'
import { createCallWrites, type InjectedCredential, type RewrittenAnswer } from './call-writes.js'
import { guardAnswer, type WithheldReason } from './echo-guard.js'
import { graphqlProtocol } from './graphql-protocol.js'
import { blankHopByHop, forwardedHeaders } from './hop-by-hop.js'
import { reachedAtLoopback } from './local-clients.js'
import { mcpProtocol } from './mcp-protocol.js'
import { OVERRIDE_HEADERS } from './method-override.js'
import { oneRequestAtATime } from './one-request-at-a-time.js'
import type { ProxyIdentity } from './proxy-identity.js'
import { sendJson } from './proxy-responses.js'
import { type LocalSystems, type ProxyContext, planProxyRequest } from './request-plan.js'
import { parseTarget } from './request-target.js'
import { relayRewritten, rewriteReadsBody } from './rewritten-response.js'
import { sameAuthority } from './same-authority.js'
import type { SystemCredentials } from './system-credentials.js'
import type { TlsInterception } from './tls-interception.js'
import { UPSTREAM_TIMEOUT_CODE } from './upstream-agent.js'

type WriteContext = Extract<ProxyContext, { kind: 'write' }>

export const GRANT_HEADER = 'x-writegate-grant'
export const RECEIPT_HEADER = 'x-writegate-receipt'
/**
 * Headers an agent may not pass upstream: its own credentials, writegate's own, and any that
 * would make the upstream see another method, path or host than the one decided. (Hop-by-hop
 * headers, Proxy-Authorization among them, are stripped before these.)
 */
const STRIPPED: ReadonlySet<string> = new Set([
  'authorization',
  GRANT_HEADER,
  RECEIPT_HEADER,
  ...OVERRIDE_HEADERS,
  // The agent's expectation was the proxy's to meet (continueIfExpected); the body goes out whole.
  'expect',
])
/** How long close() lets in-flight requests and tunnels finish before cutting their connections. */
const CLOSE_GRACE_MS = 2000
/** An answer read whole to be rewritten (a tools/list result), or one event of a stream, is refused past this. */
export const MAX_REWRITTEN_ANSWER_BYTES = 16 * 1024 * 1024

/** How a system's upstream is connected to: verified against its bundle, held to public addresses. */
export interface UpstreamConnection {
  caBundle?: string | undefined
  publicOnly: boolean
}

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

/** What the proxy keeps on an agent's request while forwarding it, for its event handlers. */
type Forwarded = IncomingMessage & {
  wgReceipt?: string
  wgStart?: number
  wgSystemId?: string
  wgContinued?: boolean
  /** Its cut was logged (http-proxy reports one cut more than once). */
  wgCut?: boolean
  /** The answer is relayed rewritten (MCP's filterToolsList), not piped. */
  wgRewrite?: RewrittenAnswer
  /** Its upstream connection is not kept for another request (a read that carried a body). */
  wgCloseUpstream?: boolean
  /** It carried an injected credential: its answer is searched for these before it is relayed. */
  wgEcho?: EchoNeedles
  /** Its answer was withheld (answered instead, or cut), for carrying back the credential. */
  wgWithheld?: boolean
}

/**
 * An agent that sent `Expect: 100-continue` (the server hands those to us undecided) gets its
 * 100 only once its body is wanted: forwarded, or read to stage it. A write refused first is
 * answered without it, and the body it held back is never uploaded.
 */
function continueIfExpected(req: IncomingMessage, res: ServerResponse): void {
  const r = req as Forwarded
  if (r.wgContinued || res.headersSent) return
  const expect = req.headers.expect
  // As Node's server: an interim 100 is HTTP/1.1's; an HTTP/1.0 client is not waiting for one.
  if (
    req.httpVersion === '1.1' &&
    typeof expect === 'string' &&
    expect.toLowerCase().includes('100-continue')
  ) {
    r.wgContinued = true
    res.writeContinue()
  }
}

/** A refusal from the error registry, as gate-proxy answers it (contract §8 shapes). */
function sendRefusal(
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

/**
 * gate-proxy: a write reaches its upstream only when the gate says ALLOW and its receipt
 * is durable. Every other outcome answers the agent without contacting the upstream.
 */
export function createGateProxy(deps: GateProxyDeps): GateProxy {
  const { logger, metrics } = deps
  // The agent hanging up mid-forward is the agent's doing: the decision and its receipt stand,
  // and it is no failure of the proxy or the upstream. http-proxy reports it as `econnreset`.
  function clientWentAway(req: IncomingMessage): void {
    const r = req as Forwarded
    if (r.wgCut) return
    r.wgCut = true
    logger.info(
      { system: r.wgSystemId, receiptId: r.wgReceipt },
      'client request cut short while forwarding (it went away, or sent what is no HTTP)',
    )
  }
  const clientGone = (req: IncomingMessage, res: ServerResponse) => res.destroyed || req.socket.destroyed
  function onUnaskedUpgrade(this: ClientRequest, _res: IncomingMessage, socket: Duplex): void {
    socket.destroy()
    this.emit(
      'error',
      Object.assign(new Error('the upstream switched protocols unasked'), { code: 'WG_UPGRADE' }),
    )
  }

  /**
   * One http-proxy server per upstream origin, its target and agent fixed at creation. Options
   * passed per request are merged into a fresh object on every call, and every later pass then
   * reads its options off that object: measurably slower than a server's own options.
   */
  const proxies = new Map<string, ProxyServer>()
  function proxyFor(upstream: string, how: UpstreamConnection): ProxyServer {
    const key = `${upstream}\n${how.publicOnly ? 'public' : 'any'}\n${how.caBundle ?? ''}`
    let proxy = proxies.get(key)
    if (proxy) return proxy
    const origin = new URL(upstream)
    proxy = createProxyServer({
      target: origin,
      agent: deps.agentFor(origin, how),
      xfwd: false,
      changeOrigin: true,
      // No proxyTimeout: the origin's agent cuts a silent upstream (upstream-agent.ts).
      followRedirects: false,
    })
    // Before the pass that sends it, a chunked body's framing is put back (body-framing.ts).
    proxy.before('web', SENDING_PASS, keepChunked)
    proxy.on('econnreset', (_err, req) => clientWentAway(req))
    // No upgrade is ever forwarded (the agent's Upgrade is stripped): a 101 is the upstream
    // switching protocols unasked. With no 'upgrade' listener Node drops the socket and tells no
    // one, and the agent would wait for an answer for ever: failed instead, as an upstream error.
    proxy.on('proxyReq', (proxyReq) => proxyReq.on('upgrade', onUnaskedUpgrade))
    proxy.on('proxyRes', (proxyRes, req, res) => {
      const r = req as Forwarded
      // Node's client takes a status the server side throws on, outside any handler: one
      // upstream answering `HTTP/1.1 000 X` or a control byte in its reason ended the process,
      // the control plane with it in the embedded default (found in review).
      if (!relayableStatus(proxyRes)) {
        r.wgWithheld = true
        proxyRes.destroy()
        logger.warn(
          { system: r.wgSystemId, status: proxyRes.statusCode },
          'upstream answered a status that cannot be relayed',
        )
        sendJson(res, ERRORS.upstreamError.status, {
          error: 'the upstream answered with a status that cannot be relayed',
          code: ERRORS.upstreamError.code,
          ...(r.wgReceipt ? { receiptId: r.wgReceipt } : {}),
        })
        return
      }
      // An upstream response cut short (a body silent past the timeout, a reset) must cut the
      // agent's short too: http-proxy's pipe would leave it waiting for the rest forever.
      proxyRes.once('close', () => {
        if (!proxyRes.complete && !res.destroyed && !r.wgWithheld) res.destroy()
      })
      // The rewrite refuses a compressed answer it reads; one it passes unread (an error, an
      // empty answer) is judged here, or a gzipped echo of the credential reached the agent
      // (found in review).
      const judgedByRewrite = !!r.wgRewrite && rewriteReadsBody(proxyRes)
      if (r.wgEcho && !guardAnswer(proxyRes, req.method ?? '', r.wgEcho, echoGuard(r, res), judgedByRewrite))
        return
      // Node keeps a connection whose answer says keep-alive, though the request said close:
      // not this one (see forward).
      if (r.wgCloseUpstream)
        (proxyRes as unknown as { req: { shouldKeepAlive: boolean } }).req.shouldKeepAlive = false
      blankHopByHop(proxyRes.headers)
      // http-proxy fills a missing Connection from the request's, which forwardedHeaders left out, or
      // else says keep-alive: a client that sent Connection: close would be kept waiting on an
      // open socket. Say what Node decided for this client.
      proxyRes.headers.connection = (res as unknown as { shouldKeepAlive: boolean }).shouldKeepAlive
        ? 'keep-alive'
        : 'close'
      // The agent reads this header as writegate's word that a decision was made; an upstream
      // (answering an ungated read, say) cannot speak for writegate. Blank, not deleted: as above.
      proxyRes.headers[RECEIPT_HEADER] = r.wgReceipt
      if (r.wgStart !== undefined)
        metrics.observeUpstream(r.wgSystemId ?? '', (performance.now() - r.wgStart) / 1000)
      const rewritten = r.wgRewrite
      if (rewritten)
        relayRewritten(proxyRes, res, rewritten.rewrite, {
          maxBytes: MAX_REWRITTEN_ANSWER_BYTES,
          unreadable(problem, headersSent) {
            metrics.gateEvents.failedClosed({ reason: 'tools_list_unfilterable' })
            logger.warn({ system: r.wgSystemId, problem }, 'MCP answer not relayed: it could not be filtered')
            if (!headersSent) rewritten.unreadable(problem)
          },
        })
    })
    proxies.set(key, proxy)
    return proxy
  }

  /** What happens to an answer that carries back the injected credential (echo-guard.ts). */
  function echoGuard(r: Forwarded, res: ServerResponse) {
    const withheld = (reason: WithheldReason, header?: string) => {
      r.wgWithheld = true
      metrics.gateEvents.failedClosed({ reason })
      logger.warn(
        { system: r.wgSystemId, receiptId: r.wgReceipt, reason, ...(header ? { header } : {}) },
        reason === 'answer_compressed'
          ? 'upstream answer withheld: compressed, so it could not be searched for the injected credential'
          : 'upstream answer withheld: it carried back the injected credential',
      )
    }
    const answer = (reason: WithheldReason) => {
      const def = ERRORS.answerWithheld
      sendJson(
        res,
        def.status,
        { error: def.message, code: def.code, reason, ...(r.wgReceipt ? { receiptId: r.wgReceipt } : {}) },
        { connection: 'close' },
      )
    }
    return {
      withhold(reason: WithheldReason, header?: string) {
        withheld(reason, header)
        answer(reason)
      },
      cut() {
        // Answered already (a rewritten answer refused as unreadable, whose body still flows): that
        // stands, and the close of the upstream's answer must not cut it.
        if (res.writableEnded) {
          r.wgWithheld = true
          return
        }
        withheld('credential_echoed')
        // Node writes the headers with the first chunk of the body: if that chunk is the one cut,
        // nothing has gone out, and the agent is answered, as for an echo in a header.
        if (res.headersSent || res.destroyed) {
          res.destroy()
          return
        }
        for (const name of res.getHeaderNames()) res.removeHeader(name)
        res.sendDate = true // removing `date` turned it off
        res.statusMessage = '' // http-proxy set the upstream's: the 502 gets its own
        // The pipe still writes this chunk, to an ended answer: Node reports that as an error.
        res.on('error', () => {})
        answer('credential_echoed')
      },
    }
  }

  /** The proxy for a system record: records are kept per snapshot, so most requests find theirs here. */
  const proxyOfRecord = new WeakMap<SystemRecord, ProxyServer>()
  function proxyOf(system: SystemRecord): ProxyServer {
    let proxy = proxyOfRecord.get(system)
    if (!proxy) {
      proxy = proxyFor(system.upstream, { caBundle: system.caBundle, publicOnly: system.publicOnly === true })
      proxyOfRecord.set(system, proxy)
    }
    return proxy
  }

  function forward(
    req: IncomingMessage,
    res: ServerResponse,
    system: SystemRecord,
    credential: InjectedCredential | null,
    path: string,
    receiptId: string | null,
    buffered?: Buffer,
    rewritten?: RewrittenAnswer,
  ): void {
    // Not req.destroyed: a request whose body was read (to stage it) is destroyed once read.
    if (clientGone(req, res)) {
      // Gone while its write was decided: the decision and its receipt stand, and nothing was
      // sent. On record, for whoever reconciles the receipt; the client's doing, so at info.
      // (A read or stream that passes ungated has no receipt to reconcile: nothing to say.)
      if (receiptId)
        logger.info(
          { system: system.systemId, receiptId },
          'client went away before its write was forwarded: nothing was sent upstream',
        )
      return
    }
    continueIfExpected(req, res)
    // Set on the agent's headers, which http-proxy copies, rather than in its 'proxyReq' event:
    // it skips that event for a request carrying `Expect`, which would go out without them.
    // The upstream learns which receipt authorised the write, so it can log or reconcile it.
    // A request with a body, but for a POST, PUT or PATCH, asks the upstream to close its
    // connection, and the connection is not kept for another request, whether it passes ungated
    // or was decided, streamed or read whole (a GraphQL GET). Servers with a CL.0 flaw ignore the
    // body of a GET or a DELETE: its bytes would start a request of the agent's writing, whose own
    // length swallows the next request the proxy sends on that pooled connection, injected
    // credential and all, where the agent can read it back.
    const closeAfter =
      !BODY_READ_BY_EVERY_SERVER.has(req.method ?? '') &&
      (carriesBody(req.headers) || (buffered?.length ?? 0) > 0)
    const set: Record<string, string | null> = {
      [RECEIPT_HEADER]: receiptId,
      connection: closeAfter ? 'close' : null,
    }
    if (credential) {
      set[credential.header] = credential.value
      // Its answer is searched for the secret: asked for uncompressed (one compressed anyway is withheld).
      if (credential.needles.forms.length > 0) set['accept-encoding'] = 'identity'
    }
    req.headers = forwardedHeaders(
      req.headers,
      STRIPPED,
      set,
      // A rewritten answer is read whole: asked for uncompressed (one that comes compressed anyway is refused).
      rewritten ? 'accept-encoding' : undefined,
    )
    frameBody(req.headers, buffered)
    markChunked(req, buffered)
    req.url = path
    const r = req as Forwarded
    r.wgSystemId = system.systemId
    r.wgStart = performance.now()
    if (receiptId) r.wgReceipt = receiptId
    if (rewritten) r.wgRewrite = rewritten
    if (closeAfter) r.wgCloseUpstream = true
    if (credential && credential.needles.forms.length > 0) r.wgEcho = credential.needles
    const onError = (err: Error) => {
      const code = (err as NodeJS.ErrnoException)?.code
      const timedOut = code === UPSTREAM_TIMEOUT_CODE || code === 'ETIMEDOUT'
      if (clientGone(req, res)) return clientWentAway(req)
      logger.warn({ err, system: system.systemId }, 'upstream request failed')
      if (!res.headersSent) {
        // A certificate that does not verify fails the handshake, and a name that now resolves
        // inside fails the lookup: either way nothing of the write was sent.
        const certificate = code !== undefined && CERTIFICATE_ERRORS.test(code)
        const inside = err instanceof PrivateAddressRefused
        const def = timedOut
          ? ERRORS.upstreamTimeout
          : certificate
            ? ERRORS.upstreamCertificateInvalid
            : inside
              ? ERRORS.upstreamAddressRefused
              : ERRORS.upstreamError
        sendJson(res, def.status, {
          error: timedOut || certificate || inside ? def.message : 'upstream unreachable',
          code: def.code,
          ...(certificate ? { certificateError: code } : {}),
          ...(receiptId ? { receiptId } : {}),
        })
      } else res.destroy()
    }
    const proxy = proxyOf(system)
    // Per-request options cost a merge on every call: only the rare rewritten answer pays it.
    if (buffered) sendReadBody(req, buffered)
    if (rewritten) proxy.web(req, res, { selfHandleResponse: true }, onError)
    else proxy.web(req, res, onError)
  }

  const injectedOf = new WeakMap<object, InjectedCredential>()
  /** The credential to inject, or the 503 that says it cannot be (nothing is forwarded). */
  function credentialFor(
    res: ServerResponse,
    system: SystemRecord,
    extra: Record<string, unknown> = {},
    answer?: (def: ErrorDef, error: string, detail: Record<string, unknown>) => void,
  ): InjectedCredential | null | false {
    const resolved = deps.credentials.get(system)
    if (resolved === null) return null
    if (resolved.ok) {
      // Resolved credentials are kept per system version: so are their needles.
      let injected = injectedOf.get(resolved)
      if (!injected) {
        injected = { header: resolved.header, value: resolved.value, needles: echoNeedles(resolved.secret) }
        injectedOf.set(resolved, injected)
      }
      return injected
    }
    metrics.gateEvents.failedClosed({ reason: 'credential_unavailable' })
    const detail = { systemId: system.systemId, ...extra }
    const def = ERRORS.credentialUnavailable
    if (answer) answer(def, def.message, detail)
    else sendRefusal(res, def, def.message, detail)
    return false
  }

  function failClosed(res: ServerResponse, reason: string): void {
    metrics.gateEvents.failedClosed({ reason })
    sendRefusal(res, ERRORS.gateUnavailable, ERRORS.gateUnavailable.message)
  }

  /** An answer in a body-aware protocol's own terms (a JSON-RPC error, a GraphQL error document). */
  function sendProtocolAnswer(res: ServerResponse, status: number, contentType: string, body: string): void {
    if (res.headersSent) return void res.destroy()
    res.writeHead(status, {
      'content-type': contentType,
      'content-length': Buffer.byteLength(body),
      'cache-control': 'no-store',
      connection: 'close',
    })
    res.end(body)
  }

  const handleCalls = createCallWrites({
    writes: deps.writes,
    protocols: {
      graphql: graphqlProtocol as CallProtocol<unknown>,
      mcp: mcpProtocol as CallProtocol<unknown>,
    },
    environment: deps.environment,
    maxBodyBytes: deps.maxInspectedBodyBytes,
    logger,
    clock: deps.clock,
    credentialFor,
    forward,
    continueIfExpected,
    send: sendProtocolAnswer,
  })

  /**
   * Whether a client may write through this proxy: its own pod's, unless remote ones are served
   * too. Judged once per connection (kept-alive ones carry many requests).
   */
  const localSockets = new WeakMap<Socket, boolean>()
  function servesClient(socket: Socket): boolean {
    if (deps.remoteClients === true) return true
    let local = localSockets.get(socket)
    if (local === undefined) {
      local = reachedAtLoopback(socket.localAddress)
      localSockets.set(socket, local)
    }
    return local
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const startedAt = performance.now()
    const url = req.url ?? '/'
    // Inside an intercepted tunnel every path is the upstream's, and the Host must be the one
    // the tunnel (and its certificate) was opened for.
    const intercepted = deps.interception?.authorityOf(req.socket)
    if (intercepted !== undefined) {
      if (!sameAuthority(req.headers.host, intercepted)) {
        deps.metrics.tlsRefused('host_mismatch')
        return sendRefusal(res, ERRORS.misdirectedRequest, ERRORS.misdirectedRequest.message)
      }
    } else if (url === '/healthz') return sendJson(res, 200, { ok: true })
    else if (url === '/readyz') {
      const r = await api.readiness()
      // Another pod (the kubelet) gets the status, not which credentials are unavailable, or why.
      return sendJson(res, r.ready ? 200 : 503, servesClient(req.socket) ? { ...r } : { ready: r.ready })
    } else if (!servesClient(req.socket))
      return sendRefusal(res, ERRORS.remoteClient, ERRORS.remoteClient.message)
    const target = parseTarget(req, intercepted)
    if (!target.ok) {
      if (target.def === ERRORS.misdirectedRequest) deps.metrics.tlsRefused('host_mismatch')
      return sendRefusal(res, target.def, target.error)
    }
    const framing = framingProblem(req.headers)
    if (framing) return sendRefusal(res, ERRORS.invalidRequest, `refused framing: ${framing}`)
    const tenant = deps.identity.current()
    // Until the key resolves, which systems exist cannot be told: every request fails closed.
    if (!tenant) return failClosed(res, 'no_identity')
    const local = deps.local(tenant.tenantId)
    const method = req.method ?? 'GET'
    const hasBody = carriesBody(req.headers)
    const grantHeader = req.headers[GRANT_HEADER]
    let body: Buffer | null = null
    const write: GatedWrite<ProxyContext> = {
      tenantId: tenant.tenantId,
      keyId: tenant.keyId,
      environment: deps.environment,
      grantId: typeof grantHeader === 'string' ? grantHeader : null,
      via: 'proxy',
      chargeQuota: true,
      verb: '',
      target: null,
      systemId: null,
      recorder: 'hot',
      plan: (snap) => planProxyRequest(snap, local, target, method, hasBody),
      request: () => ({ method, path: target.path }),
      detail: (plan) => ({ systemVersion: (plan.context as WriteContext).system.version }),
      stage: (outcome, plan, checkReceiptId, at) =>
        stageHttpRequest(
          {
            tenantId: tenant.tenantId,
            systemId: (plan.context as WriteContext).system.systemId,
            systemVersion: (plan.context as WriteContext).system.version,
            verb: outcome.verb,
            target: plan.target,
            environment: deps.environment,
            principalId: outcome.principalId ?? '',
            principalName: outcome.principalName,
            keyId: tenant.keyId,
            stateVersion: outcome.policyVersion,
            checkReceiptId,
            at,
          },
          {
            method,
            path: target.path,
            contentType: typeof req.headers['content-type'] === 'string' ? req.headers['content-type'] : null,
            body,
            // What the body's bytes are: replayed with them (forwarded as is on ALLOW too).
            ...(typeof req.headers['content-encoding'] === 'string'
              ? { headers: { 'content-encoding': req.headers['content-encoding'] } }
              : {}),
          },
        ),
    }
    // The current snapshot's reading of the request: a write its system cannot take a
    // credential for is refused before anything is decided, and a write predicted STEP_UP has
    // its body read first, to stage it. (If the state changes in between, the action is staged
    // without it.) The gate reuses this evaluation if the snapshot is still the one it was made under.
    const prediction = await deps.writes.predict(write)
    if (!prediction) return failClosed(res, 'no_snapshot')
    if (prediction.plan.kind === 'settle' && prediction.plan.context.kind === 'calls') {
      const c = prediction.plan.context
      return handleCalls({
        req,
        res,
        tenant,
        local,
        target,
        method,
        system: c.system,
        protocol: c.protocol,
        grantId: typeof grantHeader === 'string' ? grantHeader : null,
      })
    }
    if (prediction.plan.kind === 'decide' && prediction.plan.context.kind === 'write') {
      if (credentialFor(res, prediction.plan.context.system) === false) return
      const predicted = prediction.evaluation
      if (predicted?.kind === 'decided' && predicted.outcome.decision === 'STEP_UP') {
        try {
          body = await readBody(req, deps.maxStagedBodyBytes, () => continueIfExpected(req, res))
        } catch (err) {
          if (err instanceof BodyTooLarge) {
            sendJson(
              res,
              413,
              {
                error: 'request body too large to stage for approval',
                code: 'payload_too_large',
                limit: deps.maxStagedBodyBytes,
              },
              { connection: 'close' },
            )
            return
          }
          // Anything else is the client's socket failing (it went away mid-body): not our error,
          // and there is no one to answer.
          logger.info(
            { cause: causeOf(err), system: prediction.plan.context.system.systemId },
            'client went away before its request body was read',
          )
          res.destroy()
          return
        }
      }
    }
    const answer = await deps.writes.run(write, prediction)
    if (answer.kind === 'settled') {
      const c = answer.context
      if (c.kind === 'refused') return sendRefusal(res, c.def, c.error)
      if (c.kind !== 'pass') return failClosed(res, 'plan_mismatch')
      const credential = credentialFor(res, c.system)
      if (credential === false) return
      if (credential) {
        // It would go out with the injected credential: only while the key may act (the
        // snapshot was confirmed current by the gate).
        const barred = standingOf(answer.snapshot, tenant.keyId)
        if (barred) return sendRefusal(res, ERRORS.revoked, ERRORS.revoked.message, { barred: barred.reason })
      }
      // An MCP endpoint's event stream (GET, a resumption included) with filterToolsList:
      // a tools/list result replayed on it is filtered as on the POST's answer.
      // Only the GET stream carries JSON-RPC: a DELETE's or OPTIONS's answer passes as it is.
      const filter = c.protocol === 'mcp' && method === 'GET' ? mcpProtocol.answerFilter?.(c.system) : null
      if (filter) {
        const def = ERRORS.toolsListUnfilterable
        const rewritten: RewrittenAnswer = {
          rewrite: filter(
            answer.snapshot,
            { keyId: tenant.keyId, environment: deps.environment },
            nowSeconds(deps.clock),
          ),
          // No request of the agent's to answer by id: MCP's own rendering, `id: null`, the registry's status.
          unreadable: (problem) => {
            const r = mcpProtocol.render(
              { kind: 'refused', def, error: `${def.message}: ${problem}`, detail: { problem }, call: null },
              [],
              { method, pathWithQuery: c.path, contentType: '', body: Buffer.alloc(0), headers: {} },
            )
            sendProtocolAnswer(res, r.status, r.contentType, r.body)
          },
        }
        return forward(req, res, c.system, credential, c.path, null, body ?? undefined, rewritten)
      }
      // A body read to stage a predicted STEP_UP is not on the socket any more: it goes from here.
      return forward(req, res, c.system, credential, c.path, null, body ?? undefined)
    }
    if (answer.kind === 'refused') {
      if (answer.refusal.def === ERRORS.gateUnavailable) metrics.gateEvents.failedClosed({ reason: 'commit' })
      if (answer.refusal.def === ERRORS.unknownVerb)
        logger.warn({ verbs: answer.refusal.detail.verbs }, 'route maps to a verb the tenant does not have')
    } else metrics.observeGate((performance.now() - startedAt) / 1000)
    if (answer.kind === 'decided' && answer.decision === 'ALLOW') {
      const c = answer.context as WriteContext
      const credential = credentialFor(res, c.system, { receiptId: answer.receiptId })
      if (credential === false) return
      forward(req, res, c.system, credential, c.path, answer.receiptId, body ?? undefined)
      return
    }
    const { status, body: json } = httpAnswer(answer)
    sendJson(res, status, json, { connection: 'close' })
  }

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
      for (const proxy of proxies.values()) proxy.close()
    },
  }
  return api
}

/** OpenSSL's and Node's codes for an upstream certificate that does not verify. */
const CERTIFICATE_ERRORS =
  /^(CERT_|UNABLE_TO_(GET_ISSUER|VERIFY_LEAF|DECRYPT_CERT)|DEPTH_ZERO_SELF_SIGNED_CERT|SELF_SIGNED_CERT_IN_CHAIN|ERR_TLS_CERT_ALTNAME_INVALID|HOSTNAME_MISMATCH|INVALID_CA|INVALID_PURPOSE|CERT_UNTRUSTED|CERT_REJECTED)/

/**
 * Whether Node's server can write the upstream's status line: a code of three digits from 100
 * (its client also takes 0 to 99), and a reason phrase without control bytes, which is blanked
 * (Node then writes the standard one) rather than refused.
 */
function relayableStatus(proxyRes: IncomingMessage): boolean {
  const code = proxyRes.statusCode ?? 0
  if (code < 100 || code > 999) return false
  if (proxyRes.statusMessage && !/^[\t\x20-\x7e\x80-\xff]*$/.test(proxyRes.statusMessage))
    proxyRes.statusMessage = ''
  return true
}
