import { createHash } from 'node:crypto'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import { connect, type Socket } from 'node:net'
import { performance } from 'node:perf_hooks'
import { Readable } from 'node:stream'
import { createProxyServer, type ProxyServer } from 'http-proxy-3'
import { ACTION_TTL_SECONDS } from '../actions/action-stager.js'
import { type Clock, nowSeconds } from '../core/clock.js'
import { ERRORS } from '../core/errors.js'
import type { Outcome } from '../core/evaluate.js'
import { newId } from '../core/ids.js'
import { draft, type ReceiptDraft } from '../core/receipt.js'
import type { Environment } from '../core/verbs.js'
import type { Gate, GateRequest } from '../gate/gate.js'
import type { SnapshotCache } from '../gate/snapshot-cache.js'
import { BodyTooLarge, readBody } from '../node-http/read-body.js'
import type { Logger } from '../observability/logger.js'
import type { Metrics } from '../observability/metrics.js'
import type { PendingAction } from '../store/ports/decision-state.js'
import type { DurablePayload, KeyRef } from '../store/ports/hot-store.js'
import { stripHopByHop } from './hop-by-hop.js'
import { OVERRIDE_HEADERS } from './method-override.js'
import { sendJson } from './proxy-responses.js'
import { NOT_ENROLLED, resolveTarget } from './request-target.js'
import { isRead, type ProxySystem, type RouteTable } from './route-table.js'
import { HTTP_REPLAY_TOOL, type HttpReplayParams } from './staged-request.js'
import { enrolledFor } from './system-tenancy.js'
import { UPSTREAM_TIMEOUT_CODE } from './upstream-agent.js'

export const GRANT_HEADER = 'x-writegate-grant'
export const RECEIPT_HEADER = 'x-writegate-receipt'
/**
 * Headers an agent may not pass upstream: its own credentials, writegate's own, and any that
 * would make the upstream see another method, path or host than the one decided. (Hop-by-hop
 * headers, Proxy-Authorization among them, are stripped before these.)
 */
const STRIPPED = ['authorization', GRANT_HEADER, RECEIPT_HEADER, ...OVERRIDE_HEADERS]
/** How long close() lets in-flight requests and tunnels finish before cutting their connections. */
const CLOSE_GRACE_MS = 2000

export interface GateProxyDeps {
  table: RouteTable
  gate: Gate
  snapshots: SnapshotCache
  /** Who the proxy acts as; null until its API key has been resolved. */
  identity: () => KeyRef | null
  clock: Clock
  logger: Logger
  metrics: Metrics
  environment: Environment | null
  maxStagedBodyBytes: number
}

export interface GateProxy {
  readonly server: Server
  listen(port: number, host: string): Promise<number>
  /** Ready once the proxy knows its key and holds its tenant's snapshot. */
  ready(): Promise<boolean>
  close(): Promise<void>
}

/** A staged body as the pending action and its receipt record it. */
interface EncodedBody {
  captured: boolean
  base64: string
  sha256: string
  bytes: number
}

function encodeBody(body: Buffer | null): EncodedBody {
  const bytes = body ?? Buffer.alloc(0)
  return {
    captured: body !== null,
    base64: bytes.toString('base64'),
    sha256: createHash('sha256').update(bytes).digest('hex'),
    bytes: bytes.length,
  }
}

/** What the proxy keeps on an agent's request while forwarding it, for its event handlers. */
type Forwarded = IncomingMessage & {
  wgReceipt?: string
  wgStart?: number
  wgSystem?: ProxySystem
  wgContinued?: boolean
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

interface Gated {
  system: ProxySystem
  path: string
  verb: string
  target: string | null
}

/**
 * gate-proxy: a write reaches its upstream only when the gate says ALLOW and its receipt
 * is durable. Every other outcome answers the agent without contacting the upstream.
 */
export function createGateProxy(deps: GateProxyDeps): GateProxy {
  const { table, gate, logger, metrics, clock } = deps
  // The agent hanging up mid-forward is the agent's doing: the decision and its receipt stand,
  // and it is no failure of the proxy or the upstream. http-proxy reports it as `econnreset`.
  function clientWentAway(req: IncomingMessage): void {
    const r = req as Forwarded
    logger.info(
      { system: r.wgSystem?.system.systemId, receiptId: r.wgReceipt },
      'client went away while forwarding',
    )
  }
  const clientGone = (req: IncomingMessage, res: ServerResponse) => res.destroyed || req.socket.destroyed

  /**
   * One http-proxy server per enrolled system, its target and agent fixed at creation. Options
   * passed per request are merged into a fresh object on every call, and every later pass then
   * reads its options off that object: measurably slower than a server's own options.
   */
  const proxies = new Map<ProxySystem, ProxyServer>()
  function proxyFor(system: ProxySystem): ProxyServer {
    let proxy = proxies.get(system)
    if (proxy) return proxy
    proxy = createProxyServer({
      target: system.origin,
      agent: system.agent,
      xfwd: false,
      changeOrigin: true,
      // No proxyTimeout: the system's agent cuts a silent upstream (upstream-agent.ts).
      followRedirects: false,
    })
    proxy.on('econnreset', (_err, req) => clientWentAway(req))
    proxy.on('proxyRes', (proxyRes, req, res) => {
      const r = req as Forwarded
      // An upstream response cut short (a body silent past the timeout, a reset) must cut the
      // agent's short too: http-proxy's pipe would leave it waiting for the rest forever.
      proxyRes.once('close', () => {
        if (!proxyRes.complete && !res.destroyed) res.destroy()
      })
      stripHopByHop(proxyRes.headers, 'blank')
      // The agent reads this header as writegate's word that a decision was made; an upstream
      // (answering an ungated read, say) cannot speak for writegate. Blank, not deleted: as above.
      proxyRes.headers[RECEIPT_HEADER] = r.wgReceipt
      if (r.wgStart !== undefined)
        metrics.observeUpstream(system.system.systemId, (performance.now() - r.wgStart) / 1000)
    })
    proxies.set(system, proxy)
    return proxy
  }

  function forward(
    req: IncomingMessage,
    res: ServerResponse,
    system: ProxySystem,
    path: string,
    receiptId: string | null,
    buffered?: Buffer,
  ): void {
    // Not req.destroyed: a request whose body was read (to stage it) is destroyed once read.
    if (clientGone(req, res)) return
    continueIfExpected(req, res)
    stripHopByHop(req.headers)
    for (const h of STRIPPED) delete req.headers[h]
    // Set on the agent's headers, which http-proxy copies, rather than in its 'proxyReq' event:
    // it skips that event for a request carrying `Expect`, which would go out without them.
    if (system.credential) req.headers[system.credential.header] = system.credential.value
    // The upstream learns which receipt authorised the write, so it can log or reconcile it.
    if (receiptId) req.headers[RECEIPT_HEADER] = receiptId
    req.url = path
    const r = req as Forwarded
    r.wgSystem = system
    r.wgStart = performance.now()
    if (receiptId) r.wgReceipt = receiptId
    const onError = (err: Error) => {
      const code = (err as NodeJS.ErrnoException)?.code
      const timedOut = code === UPSTREAM_TIMEOUT_CODE || code === 'ETIMEDOUT'
      if (clientGone(req, res)) return clientWentAway(req)
      logger.warn({ err, system: system.system.systemId }, 'upstream request failed')
      if (!res.headersSent) {
        const def = timedOut ? ERRORS.upstreamTimeout : ERRORS.upstreamError
        sendJson(res, def.status, {
          error: timedOut ? def.message : 'upstream unreachable',
          code: def.code,
          ...(receiptId ? { receiptId } : {}),
        })
      } else res.destroy()
    }
    const proxy = proxyFor(system)
    if (buffered) proxy.web(req, res, { buffer: Readable.from(buffered) }, onError)
    else proxy.web(req, res, onError)
  }

  function stagedAction(
    g: Gated,
    outcome: Outcome,
    tenant: KeyRef,
    req: IncomingMessage,
    body: EncodedBody,
    checkReceiptId: string,
    at: number,
  ): { action: PendingAction; receipt: ReceiptDraft } {
    const actionId = newId('action')
    const params: HttpReplayParams = {
      method: req.method ?? 'POST',
      path: g.path,
      contentType: typeof req.headers['content-type'] === 'string' ? req.headers['content-type'] : null,
      body: body.base64,
      bodySha256: body.sha256,
      bodyCaptured: body.captured,
    }
    const receipt = draft({
      receiptId: newId('receipt'),
      tenantId: tenant.tenantId,
      kind: 'ACTION_STAGED',
      createdAt: at,
      verb: outcome.verb,
      target: g.target,
      environment: deps.environment,
      principalId: outcome.principalId,
      principalName: outcome.principalName,
      keyId: tenant.keyId,
      policyVersion: outcome.policyVersion,
      // The audit log records a digest of the body; the pending action holds the bytes to replay.
      detail: {
        actionId,
        systemId: g.system.system.systemId,
        tool: HTTP_REPLAY_TOOL,
        request: {
          method: params.method,
          path: params.path,
          contentType: params.contentType,
          bodySha256: params.bodySha256,
          bodyBytes: body.bytes,
        },
        expiresAt: at + ACTION_TTL_SECONDS,
        checkReceiptId,
      },
    })
    const action: PendingAction = {
      actionId,
      tenantId: tenant.tenantId,
      systemId: g.system.system.systemId,
      tool: HTTP_REPLAY_TOOL,
      params,
      verb: outcome.verb,
      target: g.target,
      environment: deps.environment,
      principalId: outcome.principalId ?? '',
      keyId: tenant.keyId,
      stagedReceiptId: receipt.receiptId,
      createdAt: at,
      expiresAt: at + ACTION_TTL_SECONDS,
    }
    return { action, receipt }
  }

  async function gated(
    req: IncomingMessage,
    res: ServerResponse,
    g: Gated,
    tenant: KeyRef,
    startedAt: number,
  ): Promise<void> {
    const grantHeader = req.headers[GRANT_HEADER]
    // Encoded once, however many times the gate asks for the STEP_UP payload (stale retries).
    let encoded: EncodedBody | undefined
    let body: Buffer | null = null
    const method = req.method ?? 'GET'
    const gateReq: GateRequest = {
      tenantId: tenant.tenantId,
      keyId: tenant.keyId,
      verb: g.verb,
      target: g.target,
      environment: deps.environment,
      grantId: typeof grantHeader === 'string' ? grantHeader : null,
      systemId: g.system.system.systemId,
      chargeQuota: true,
      durableFor,
    }
    // A STEP_UP write is staged with its body, so read it first when the current snapshot
    // predicts STEP_UP. (If the state changes in between, the action is staged without it.)
    // The gate reuses this evaluation if the snapshot is still the one it was made under.
    const prediction = await gate.predict(gateReq)
    if (prediction?.evaluation.kind === 'decided' && prediction.evaluation.outcome.decision === 'STEP_UP') {
      try {
        continueIfExpected(req, res)
        body = await readBody(req, deps.maxStagedBodyBytes)
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
          { err, system: g.system.system.systemId },
          'client went away before its request body was read',
        )
        res.destroy()
        return
      }
    }
    function durableFor(outcome: Outcome): DurablePayload {
      const at = nowSeconds(clock)
      const receiptId = newId('receipt')
      if (outcome.decision === 'STEP_UP' && !encoded) encoded = encodeBody(body)
      const staged =
        encoded && outcome.decision === 'STEP_UP'
          ? stagedAction(g, outcome, tenant, req, encoded, receiptId, at)
          : null
      const check = draft({
        receiptId,
        tenantId: tenant.tenantId,
        kind: 'CHECK',
        decision: outcome.decision,
        createdAt: at,
        verb: outcome.verb,
        requestedVerb: g.verb,
        target: g.target,
        environment: deps.environment,
        principalId: outcome.principalId,
        principalName: outcome.principalName,
        keyId: tenant.keyId,
        reason: outcome.reason,
        policyVersion: outcome.policyVersion,
        detail: {
          via: 'proxy',
          systemId: g.system.system.systemId,
          request: { method, path: g.path },
          mode: outcome.mode,
          provenance: outcome.provenance,
          layers: outcome.layers,
          ...(outcome.grantId ? { grantId: outcome.grantId } : {}),
          ...(staged ? { actionId: staged.action.actionId } : {}),
        },
      })
      return { receipts: staged ? [check, staged.receipt] : [check], actions: staged ? [staged.action] : [] }
    }
    const result = await gate.decide(gateReq, prediction)
    metrics.observeGate((performance.now() - startedAt) / 1000)
    switch (result.kind) {
      case 'unavailable':
        sendJson(
          res,
          503,
          { error: 'gate unavailable', decision: 'DENY', reason: 'gate_unavailable' },
          { connection: 'close' },
        )
        return
      case 'quota_exhausted':
        sendJson(
          res,
          429,
          {
            error: 'monthly check quota exhausted',
            code: 'quota_exhausted',
            decision: 'DENY',
            reason: 'quota_exhausted',
            limit: result.limit,
            used: result.used,
            resetsAt: result.resetsAt,
          },
          { connection: 'close' },
        )
        return
      case 'unknown_verb':
        logger.warn(
          { verb: result.verb, system: g.system.system.systemId },
          'route maps to a verb the tenant does not have',
        )
        sendJson(
          res,
          403,
          {
            error: 'route maps to an unknown verb',
            decision: 'DENY',
            verb: result.verb,
            reason: 'unknown_verb',
          },
          { connection: 'close' },
        )
        return
      case 'decided': {
        const receiptId = result.durable?.receipts[0]?.receiptId ?? null
        const o = result.outcome
        if (o.decision === 'ALLOW') {
          forward(req, res, g.system, g.path, receiptId, body ?? undefined)
          return
        }
        if (o.decision === 'STEP_UP') {
          const actionId = result.durable?.actions[0]?.actionId ?? null
          sendJson(
            res,
            428,
            {
              error: 'approval required',
              decision: 'STEP_UP',
              verb: o.verb,
              reason: o.reason,
              actionId,
              receiptId,
            },
            { connection: 'close' },
          )
          return
        }
        sendJson(
          res,
          403,
          { error: 'denied by writegate', decision: 'DENY', verb: o.verb, reason: o.reason, receiptId },
          { connection: 'close' },
        )
      }
    }
  }

  function failClosedNoIdentity(res: ServerResponse): void {
    metrics.gateEvents.failedClosed({ reason: 'no_identity' })
    sendJson(
      res,
      503,
      { error: 'gate unavailable', decision: 'DENY', reason: 'gate_unavailable' },
      { connection: 'close' },
    )
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const startedAt = performance.now()
    const url = req.url ?? '/'
    if (url === '/healthz') return sendJson(res, 200, { ok: true })
    if (url === '/readyz')
      return (await api.ready()) ? sendJson(res, 200, { ready: true }) : sendJson(res, 503, { ready: false })
    const tenant = deps.identity()
    const target = resolveTarget(req, table, tenant?.tenantId ?? null)
    if (!target.ok) {
      // Until the key resolves, another tenant's system answers 503 (below); so must one that
      // no tenant enrols, or the two could be told apart.
      if (!tenant && target === NOT_ENROLLED) return failClosedNoIdentity(res)
      return sendJson(res, target.status, { error: target.error, code: target.code }, { connection: 'close' })
    }
    // Another tenant's system is not ours to reach, not even for an ungated read: it would go
    // out with that tenant's credential. Until the key resolves, whose it is cannot be told.
    if (target.system.system.tenantId !== undefined) {
      if (!tenant) return failClosedNoIdentity(res)
      if (!enrolledFor(target.system.system, tenant.tenantId))
        return sendJson(
          res,
          NOT_ENROLLED.status,
          { error: NOT_ENROLLED.error, code: NOT_ENROLLED.code },
          { connection: 'close' },
        )
    }
    const method = req.method ?? 'GET'
    const route = table.match(target.system, method, target.path)
    if (!route) {
      if (isRead(method) && target.system.system.reads === 'pass')
        return forward(req, res, target.system, target.path, null)
      return sendJson(
        res,
        403,
        {
          error: isRead(method) ? 'unmapped read (reads are gated for this system)' : 'unmapped write',
          decision: 'DENY',
          reason: 'unmapped_route',
        },
        { connection: 'close' },
      )
    }
    if (!tenant) return failClosedNoIdentity(res)
    await gated(
      req,
      res,
      { system: target.system, path: target.path, verb: route.verb, target: route.target },
      tenant,
      startedAt,
    )
  }

  /** Sockets handed to the CONNECT handler: the HTTP server no longer tracks them, but close() waits for them. */
  const tunnels = new Set<Socket>()

  /** CONNECT makes an opaque tunnel: refused unless the host is on the ungated pass-through list. */
  function onConnect(req: IncomingMessage, socket: Socket, head: Buffer): void {
    tunnels.add(socket)
    socket.once('close', () => tunnels.delete(socket))
    const authority = (req.url ?? '').toLowerCase()
    const [host, port] = authority.split(':')
    const allowed = table.passthrough.has(authority) || (port === '443' && table.passthrough.has(host ?? ''))
    if (!allowed || !host) {
      const body = JSON.stringify({
        error: 'CONNECT tunnels are not gated and are refused for this host',
        decision: 'DENY',
        reason: 'tunnel_refused',
      })
      socket.end(
        `HTTP/1.1 403 Forbidden\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
      )
      return
    }
    const upstream = connect(Number(port ?? 443), host, () => {
      socket.write('HTTP/1.1 200 Connection Established\r\n\r\n')
      if (head.length > 0) upstream.write(head)
      upstream.pipe(socket)
      socket.pipe(upstream)
    })
    const kill = () => {
      upstream.destroy()
      socket.destroy()
    }
    upstream.on('error', kill)
    socket.on('error', kill)
    socket.once('close', () => upstream.destroy())
  }

  const onRequest = (req: IncomingMessage, res: ServerResponse) => {
    handle(req, res).catch((err) => {
      logger.error({ err }, 'proxy request failed')
      if (req.socket.destroyed) return // no one to tell
      sendJson(
        res,
        503,
        { error: 'gate unavailable', decision: 'DENY', reason: 'gate_unavailable' },
        { connection: 'close' },
      )
    })
  }
  const server = createServer(onRequest)
  // Expect: 100-continue is answered by the proxy once it wants the body (continueIfExpected).
  server.on('checkContinue', onRequest)
  server.on('connect', onConnect)
  server.on('clientError', (_err, socket) => {
    if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\nconnection: close\r\n\r\n')
  })

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
    async ready() {
      const id = deps.identity()
      if (!id) return false
      const snap = await deps.snapshots.get(id.tenantId).catch(() => null)
      return snap !== null
    },
    async close() {
      // Idle keep-alive connections go at once; a request still in flight (a slow upstream, a
      // long upload) gets a short grace, then its connection is cut so shutdown cannot hang.
      const closed = new Promise<void>((resolve) => server.close(() => resolve()))
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
