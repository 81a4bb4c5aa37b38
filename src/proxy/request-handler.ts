import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import { performance } from 'node:perf_hooks'
import { stageHttpRequest } from '../actions/action-stager.js'
import { type Clock, nowSeconds } from '../core/clock.js'
import { ERRORS } from '../core/errors.js'
import { type Barred, standingOf } from '../core/evaluate.js'
import type { Environment } from '../core/verbs.js'
import type { GatedWrite, GatedWrites, WriteAnswer } from '../gate/gated-write.js'
import { httpAnswer } from '../gate/http-answer.js'
import { BodyTooLarge, causeOf, readBody } from '../node-http/read-body.js'
import type { Logger } from '../observability/logger.js'
import type { Metrics } from '../observability/metrics.js'
import { carriesBody, framingProblem } from './body-framing.js'
import type { CallProtocol } from './call-protocol.js'
import { createCallWrites, type RewrittenAnswer } from './call-writes.js'
import type { CredentialFor } from './credential-injection.js'
import { continueIfExpected } from './forwarded-request.js'
import type { Readiness } from './gate-proxy.js'
import { graphqlProtocol } from './graphql-protocol.js'
import { holdBodyEnd } from './late-body.js'
import { mcpProtocol } from './mcp-protocol.js'
import type { ProxyIdentity } from './proxy-identity.js'
import { sendJson, sendRefusal } from './proxy-responses.js'
import { type LocalSystems, type ProxyContext, planProxyRequest } from './request-plan.js'
import { parseTarget } from './request-target.js'
import { sameAuthority } from './same-authority.js'
import { stagedFor } from './staged-for.js'
import type { TlsInterception } from './tls-interception.js'
import type { Forward } from './upstream-forwarding.js'
import { GRANT_HEADER } from './writegate-headers.js'

type WriteContext = Extract<ProxyContext, { kind: 'write' }>

export interface RequestHandlerDeps {
  writes: GatedWrites
  identity: ProxyIdentity
  /** Systems of a deprecated route table file, for the proxy's tenant. */
  local: (tenantId: string) => LocalSystems
  /** TLS interception of CONNECTs to enrolled https upstreams; null without an interception CA. */
  interception?: TlsInterception | null | undefined
  environment: Environment | null
  maxStagedBodyBytes: number
  /** MCP and GraphQL request bodies are read whole to be decided, up to this size. */
  maxInspectedBodyBytes: number
  clock: Clock
  logger: Logger
  metrics: Metrics
  /** The proxy's readiness, as /readyz answers it. */
  readiness(): Promise<Readiness>
  servesClient(socket: Socket): boolean
  credentialFor: CredentialFor
  forward: Forward
  /** The key's standing under the tenant's current snapshot (a write's body that arrives late). */
  standing(tenantId: string, keyId: string): Promise<Barred | null>
}

/** Thrown out of the gated-write step when the client was already answered (a body it could not read). */
const ANSWERED = Symbol('answered')

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

/**
 * An agent's request (on the proxy's port, or inside an intercepted tunnel): health and
 * readiness, refused, decided by the gate and forwarded or answered, or handed to the calls of
 * a body-aware protocol (call-writes.ts).
 */
export function createRequestHandler(deps: RequestHandlerDeps): {
  handle(req: IncomingMessage, res: ServerResponse): Promise<void>
} {
  const { logger, metrics, servesClient, credentialFor, forward } = deps

  function failClosed(res: ServerResponse, reason: string): void {
    metrics.gateEvents.failedClosed({ reason })
    sendRefusal(res, ERRORS.gateUnavailable, ERRORS.gateUnavailable.message)
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
      const r = await deps.readiness()
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
    // A body still arriving once the write is decided goes upstream whole only if the key still
    // stands when it ends (late-body.ts). One that arrived with its headers costs nothing here.
    const holdIfLate = () => {
      if (body === null && hasBody && !req.complete)
        holdBodyEnd(req, () => deps.standing(tenant.tenantId, tenant.keyId))
    }
    /** Reads the body a STEP_UP stages; false when the client was answered instead (too large, gone). */
    const readBodyToStage = async (systemId: string | null): Promise<boolean> => {
      try {
        body = await readBody(req, deps.maxStagedBodyBytes, () => continueIfExpected(req, res))
        return true
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
          return false
        }
        // Anything else is the client's socket failing (it went away mid-body): not our error,
        // and there is no one to answer.
        logger.info(
          { cause: causeOf(err), ...(systemId ? { system: systemId } : {}) },
          'client went away before its request body was read',
        )
        res.destroy()
        return false
      }
    }
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
      // Decided STEP_UP when predicted otherwise (the state changed in between): its body is
      // read then, and the write decided again, never staged without it (found in review).
      mayStage: () => body !== null || !hasBody,
      readForStaging: async () => {
        if (!(await readBodyToStage(null))) throw ANSWERED
      },
      stage: (outcome, plan, checkReceiptId, at) =>
        stageHttpRequest(stagedFor(tenant, deps.environment, outcome, plan, checkReceiptId, at), {
          method,
          path: target.path,
          contentType: typeof req.headers['content-type'] === 'string' ? req.headers['content-type'] : null,
          body,
          // What the body's bytes are: replayed with them (forwarded as is on ALLOW too).
          ...(typeof req.headers['content-encoding'] === 'string'
            ? { headers: { 'content-encoding': req.headers['content-encoding'] } }
            : {}),
        }),
    }
    // The current snapshot's reading of the request: a write its system cannot take a
    // credential for is refused before anything is decided, and a write predicted STEP_UP has
    // its body read first, to stage it (one decided STEP_UP otherwise has it read then:
    // readForStaging). The gate reuses this evaluation if the snapshot is still the one it was made under.
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
        if (!(await readBodyToStage(prediction.plan.context.system.systemId))) return
      }
    }
    let answer: WriteAnswer<ProxyContext>
    try {
      answer = await deps.writes.run(write, prediction)
    } catch (err) {
      if (err === ANSWERED) return
      throw err
    }
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
      if (credential) holdIfLate()
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
      holdIfLate()
      forward(req, res, c.system, credential, c.path, answer.receiptId, body ?? undefined)
      return
    }
    const { status, body: json } = httpAnswer(answer)
    sendJson(res, status, json, { connection: 'close' })
  }

  return { handle }
}
