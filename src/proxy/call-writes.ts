import type { IncomingMessage, ServerResponse } from 'node:http'
import { REPLAYED_HEADERS } from '../actions/staged-request.js'
import { type Clock, nowSeconds } from '../core/clock.js'
import type { EchoNeedles } from '../core/credential-echo.js'
import type { SystemRecord } from '../core/enrolled-system.js'
import { ERRORS, type ErrorDef } from '../core/errors.js'
import { standingOf } from '../core/evaluate.js'
import type { Environment } from '../core/verbs.js'
import type { GatedWrite, GatedWrites } from '../gate/gated-write.js'
import { BodyTooLarge, causeOf, readBody } from '../node-http/read-body.js'
import type { Logger } from '../observability/logger.js'
import type { KeyRef } from '../store/ports/hot-store.js'
import type { CallProtocol, CallRefusal, CallRequest } from './call-protocol.js'
import type { MessageRewrite } from './mcp-tools-filter.js'
import { type LocalSystems, type ProxyContext, planCall } from './request-plan.js'
import type { ParsedTarget } from './request-target.js'
import { stagedFor } from './staged-for.js'
import type { Forward } from './upstream-forwarding.js'

/** A credential gate-proxy injects, and the forms of its secret its answer is searched for (core/credential-echo.ts). */
export interface InjectedCredential {
  header: string
  value: string
  needles: EchoNeedles
}

export interface CallWritesDeps {
  writes: GatedWrites
  protocols: Partial<Record<'mcp' | 'graphql', CallProtocol<unknown>>>
  environment: Environment | null
  /** MCP and GraphQL bodies are read whole to be decided; larger ones are refused (413). */
  maxBodyBytes: number
  logger: Logger
  clock: Clock
  /**
   * gate-proxy's own: the resolved credential, or false once the refusal (503
   * credential_unavailable) has been answered, through `answer` when given (in the protocol's terms).
   */
  credentialFor(
    res: ServerResponse,
    system: SystemRecord,
    extra?: Record<string, unknown>,
    answer?: (def: ErrorDef, error: string, detail: Record<string, unknown>) => void,
  ): InjectedCredential | null | false
  forward: Forward
  send(res: ServerResponse, status: number, contentType: string, body: string): void
  continueIfExpected(req: IncomingMessage, res: ServerResponse): void
}

/** An answer relayed rewritten, and the refusal to send when it cannot be read (before anything of it went out). */
export interface RewrittenAnswer {
  rewrite: MessageRewrite
  unreadable(problem: string): void
}

export interface CallRequestContext {
  req: IncomingMessage
  res: ServerResponse
  tenant: KeyRef
  local: LocalSystems
  target: Extract<ParsedTarget, { ok: true }>
  method: string
  system: SystemRecord
  protocol: 'mcp' | 'graphql'
  grantId: string | null
}

/**
 * A request to a body-aware endpoint (MCP, GraphQL): read its body, read the calls out of it,
 * and decide each through the one gated-write step, in order. Only if every call is ALLOW is
 * the request forwarded (the bytes as sent, with the injected credential); the first call that
 * is not stops the rest, and the whole request is answered in the protocol's terms. Nothing is
 * forwarded in part. Reads (queries, `tools/list`, notifications) pass per the system's read
 * policy, with the key's standing checked when they would carry the credential.
 */
export function createCallWrites(deps: CallWritesDeps) {
  const { writes, logger } = deps

  return async function handleCalls(ctx: CallRequestContext): Promise<void> {
    const { req, res, tenant, local, target, method, protocol: kind } = ctx
    const protocol = deps.protocols[kind]
    // The schema enrols only kinds this build reads; an unknown one is never forwarded.
    if (!protocol) {
      deps.send(
        res,
        ERRORS.unreadableCall.status,
        'application/json',
        JSON.stringify({
          error: `this build does not read ${kind} requests`,
          code: ERRORS.unreadableCall.code,
        }),
      )
      return
    }
    const headers: Record<string, string> = {}
    for (const name of REPLAYED_HEADERS) {
      const v = req.headers[name]
      if (typeof v === 'string') headers[name] = v
    }
    const request: CallRequest = {
      method,
      pathWithQuery: target.path,
      contentType: typeof req.headers['content-type'] === 'string' ? req.headers['content-type'] : '',
      body: Buffer.alloc(0),
      headers,
    }
    // Every answer from here on is in the protocol's terms (a JSON-RPC error, GraphQL errors).
    const refuse = (refusal: CallRefusal<unknown>, calls: readonly unknown[]) => {
      const r = protocol.render(refusal, calls, request)
      deps.send(res, r.status, r.contentType, r.body)
    }
    const refusal = (
      def: ErrorDef,
      error: string,
      detail: Record<string, unknown> = {},
      call: unknown = null,
    ) => ({
      kind: 'refused' as const,
      def,
      error,
      detail,
      call,
    })
    try {
      request.body = await readBody(req, deps.maxBodyBytes, () => deps.continueIfExpected(req, res))
    } catch (err) {
      if (err instanceof BodyTooLarge)
        // Unread, so no request id is known: the JSON-RPC error has `id: null`.
        return refuse(
          refusal(ERRORS.payloadTooLarge, 'request body too large to decide', { limit: deps.maxBodyBytes }),
          [],
        )
      logger.info(
        { cause: causeOf(err), system: ctx.system.systemId },
        'client went away before its request body was read',
      )
      res.destroy()
      return
    }
    const body = request.body
    // body-parser inflates gzip, deflate and (in v2) brotli before it parses; the gate reads the
    // bytes as sent. Brotli has no magic bytes that JSON could not start with, so none is read.
    const encoding = req.headers['content-encoding']
    if (encoding !== undefined && encoding.trim().toLowerCase() !== 'identity')
      return refuse(
        refusal(ERRORS.unreadableCall, `the gate cannot read this request: its body is ${encoding}-encoded`),
        [],
      )
    const read = protocol.read(request)
    if (!read.ok)
      return refuse(refusal(ERRORS.unreadableCall, `the gate cannot read this request: ${read.problem}`), [])
    const { calls } = read
    let credential = deps.credentialFor(res, ctx.system, {}, (def, error, detail) =>
      refuse(refusal(def, error, detail), calls),
    )
    if (credential === false) return
    if (read.reads > 0 && ctx.system.reads === 'gate')
      return refuse(refusal(ERRORS.unmappedCall, 'unmapped read (reads are gated for this system)'), calls)

    const base = {
      tenantId: tenant.tenantId,
      keyId: tenant.keyId,
      environment: deps.environment,
      grantId: ctx.grantId,
      via: kind,
      verb: '',
      target: null,
      systemId: null,
      recorder: 'hot' as const,
    }
    const receipts: string[] = []
    let system = ctx.system
    for (const call of calls) {
      const write: GatedWrite<ProxyContext> = {
        ...base,
        chargeQuota: true,
        plan: (snap) => planCall(snap, local, target, method, kind, (s) => protocol.map(s, call)),
        request: () => ({ method, path: target.path }),
        detail: (plan) => ({
          systemVersion: (plan.context as Extract<ProxyContext, { kind: 'write' }>).system.version,
          ...protocol.describe(call),
        }),
        stage: (outcome, plan, checkReceiptId, at) =>
          protocol.stage(
            call,
            calls,
            stagedFor(tenant, deps.environment, outcome, plan, checkReceiptId, at),
            { method, path: target.path, contentType: request.contentType || null, body, headers },
          ),
      }
      const answer = await writes.run(write)
      if (answer.kind === 'refused')
        return refuse(
          refusal(answer.refusal.def, answer.refusal.def.message, answer.refusal.detail, call),
          calls,
        )
      if (answer.kind === 'settled') {
        const c = answer.context
        return refuse(
          c.kind === 'refused'
            ? refusal(c.def, c.error, {}, call)
            : refusal(ERRORS.gateUnavailable, ERRORS.gateUnavailable.message),
          calls,
        )
      }
      if (answer.decision !== 'ALLOW') return refuse({ kind: 'decided', answer, call }, calls)
      receipts.push(answer.receiptId)
      system = (answer.context as Extract<ProxyContext, { kind: 'write' }>).system
    }

    // Reads whose answers are filtered for the key (MCP's filterToolsList) are judged under the
    // tenant's current version, as a read carrying the credential is.
    const filter = read.reads > 0 ? (protocol.answerFilter?.(ctx.system) ?? null) : null
    let answer: RewrittenAnswer | undefined
    if (calls.length === 0 || filter) {
      // Nothing written: a read. With the credential, only while the key may act, judged
      // under the tenant's current version.
      const checked = await writes.run<ProxyContext>({
        ...base,
        chargeQuota: false,
        plan: (_snap) => ({
          kind: 'settle',
          confirm: ctx.system.credential !== undefined || filter !== null,
          context: { kind: 'pass', system: ctx.system, path: target.path },
        }),
      })
      if (checked.kind !== 'settled')
        return refuse(refusal(ERRORS.gateUnavailable, ERRORS.gateUnavailable.message), calls)
      if (credential) {
        const barred = standingOf(checked.snapshot, tenant.keyId)
        if (barred)
          return refuse(refusal(ERRORS.revoked, ERRORS.revoked.message, { barred: barred.reason }), calls)
      }
      if (filter) {
        const def = ERRORS.toolsListUnfilterable
        answer = {
          rewrite: filter(
            checked.snapshot,
            { keyId: tenant.keyId, environment: deps.environment },
            nowSeconds(deps.clock),
          ),
          unreadable: (problem) => refuse(refusal(def, `${def.message}: ${problem}`, { problem }), calls),
        }
      }
    }
    if (calls.length > 0 && system !== ctx.system) {
      // The system changed while its calls were decided: inject what the deciding version names.
      credential = deps.credentialFor(res, system, { receiptId: receipts[0] }, (def, error, detail) =>
        refuse(refusal(def, error, detail), calls),
      )
      if (credential === false) return
    }
    deps.forward(
      req,
      res,
      system,
      credential,
      target.path,
      receipts.length > 0 ? receipts.join(', ') : null,
      body,
      answer,
    )
  }
}
