import type { ActionStager, ToolCall } from '../actions/action-stager.js'
import { fillText } from '../actions/param-template.js'
import { signAllowToken } from '../core/allow-token.js'
import { callProtocolOf } from '../core/call-protocol.js'
import { ERRORS, fail, WriteGateError } from '../core/errors.js'
import type { Outcome } from '../core/evaluate.js'
import { newId } from '../core/ids.js'
import { canonicalJson } from '../core/jcs.js'
import { requestBinding } from '../core/lease-binding.js'
import { sha256Hex } from '../core/secret-hash.js'
import type { CompiledSnapshot } from '../core/snapshot.js'
import { ENVIRONMENTS, type Environment, isEnvironment } from '../core/verbs.js'
import { EXECUTE_BODY_MAX_BYTES, UPSTREAM_METHODS } from '../execute/execute-service.js'
import { checkUpstreamPath, failUnsafePath } from '../execute/upstream-url.js'
import type { AllowExtras, GatedWrites } from '../gate/gated-write.js'
import type { KeyCaller } from '../identity/caller.js'
import type { Keyring } from '../security/keyring.js'
import { bodyCarriesMethodOverride } from '../systems/method-override-query.js'
import type { SystemsRegistry } from '../systems/systems-registry.js'

export interface CheckRequestBody {
  verb: string
  target?: string | undefined
  environment?: string | undefined
  grantId?: string | undefined
  request?:
    | { systemId: string; method: string; path: string; body?: Record<string, unknown> | undefined }
    | undefined
  tool?: ToolCall | undefined
}

export interface CheckResponse {
  decision: Outcome['decision']
  receiptId: string
  seq: number
  verb: string
  requestedVerb: string
  mode: string | null
  provenance: string
  policyVersion: number
  reason: string
  token?: string
  leaseId?: string
  grantId?: string
  actionId?: string
  expiresAt?: number
}

/** What the plan settles a check with: the refusal it read under the snapshot. */
type Refused = WriteGateError | null

export interface CheckService {
  check(caller: KeyCaller, body: CheckRequestBody): Promise<CheckResponse>
}

export interface CheckDeps {
  writes: GatedWrites
  keyring: Keyring
  systems: SystemsRegistry
  stager: ActionStager
  allowTtlSeconds: number
}

/**
 * POST /v1/check: the API transport over the gated-write step. Bad input is refused before
 * any decision (no receipt, no quota); every evaluated check writes a CHECK receipt, in the
 * Postgres chain before the answer (which carries its seq).
 */
export function createCheckService(deps: CheckDeps): CheckService {
  const { keyring, systems, stager } = deps

  return {
    async check(caller, body) {
      const environment = body.environment === undefined ? null : body.environment
      if (environment !== null && !isEnvironment(environment))
        fail(ERRORS.unknownEnvironment, { environment, environments: [...ENVIRONMENTS] })
      const request = body.request
      if (request) {
        if (!(await systems.system(caller.tenantId, request.systemId)))
          fail(ERRORS.unknownSystem, { systemId: request.systemId })
        if (!request.path.startsWith('/v1/'))
          fail(
            ERRORS.invalidRequest,
            { issues: [{ path: 'request.path', message: 'must begin with /v1/' }] },
            { message: 'invalid body: request.path: must begin with /v1/' },
          )
        // No lease for a path /v1/execute would refuse to send (docs/execute.md "SSRF rules").
        const verdict = checkUpstreamPath(request.path)
        if (!verdict.ok) failUnsafePath(verdict.problem)
        if (bodyCarriesMethodOverride(request.body)) fail(ERRORS.methodOverride)
        // Nor for a method it would never send: the binding is byte-exact, so `post` could never match.
        if (!(UPSTREAM_METHODS as readonly string[]).includes(request.method)) {
          fail(
            ERRORS.invalidRequest,
            { issues: [{ path: 'request.method', message: `one of ${UPSTREAM_METHODS.join(', ')}` }] },
            { message: `invalid body: request.method: one of ${UPSTREAM_METHODS.join(', ')}` },
          )
        }
        if (
          request.body !== undefined &&
          Buffer.byteLength(canonicalJson(request.body)) > EXECUTE_BODY_MAX_BYTES
        ) {
          fail(ERRORS.payloadTooLarge, { limit: EXECUTE_BODY_MAX_BYTES, field: 'request.body' })
        }
      }
      const toolRef = body.tool ? await stager.resolve(caller.tenantId, body.tool) : null

      /**
       * The verb is the one the system maps the write to, never one the agent picks: a request
       * goes through the system's route table and a tool carries its own verb, exactly as the
       * proxy would gate the same write. Read under each snapshot the gate decides under, so a
       * route or tool change is linearizable with the decision, as on the proxy (the mapping was
       * read from a snapshot of its own before; found in review). Returns the write's target, or
       * throws the refusal.
       */
      const targetUnder = (snap: CompiledSnapshot): string | null => {
        const bindings: { verb: string; target: string | null; source: string }[] = []
        if (request) {
          const compiled = snap.system(request.systemId)
          if (!compiled) fail(ERRORS.unknownSystem, { systemId: request.systemId })
          // Its writes are the calls in its body, each gated by its own verb on gate-proxy; a
          // route that also matches the path would lease them all under one (found in review).
          const calls = callProtocolOf(compiled, request.method, request.path)
          if (calls)
            fail(ERRORS.callsEndpoint, { systemId: request.systemId, protocol: calls, path: request.path })
          const route = compiled.routes.match(request.method, request.path)
          if (!route)
            fail(ERRORS.unmappedRequest, {
              systemId: request.systemId,
              method: request.method,
              path: request.path,
            })
          bindings.push({ ...route, source: `route of ${request.systemId}` })
        }
        if (toolRef && body.tool) {
          const tool = snap
            .system(toolRef.system.systemId)
            ?.record.tools.find((t) => t.name === toolRef.tool.name)
          if (!tool) fail(ERRORS.unknownTool, { tool: body.tool.name })
          bindings.push({
            verb: tool.verb,
            // The same template reading as approval's re-check ({params.a.b}, JSON for objects).
            target: tool.target === undefined ? null : fillText(tool.target, { params: body.tool.params }),
            source: `tool ${tool.name}`,
          })
        }
        if (bindings.length === 0) return body.target ?? null
        const requested = snap.vocab.resolve(body.verb)
        let target = body.target ?? null
        for (const b of bindings) {
          // An unknown requested verb is left to the gate's unknown_verb answer.
          if (requested && snap.vocab.resolve(b.verb)?.canonical !== requested.canonical) {
            fail(ERRORS.verbMismatch, { verb: body.verb, expected: b.verb, source: b.source })
          }
          if (b.target !== null) {
            if (body.target !== undefined && body.target !== b.target) {
              fail(
                ERRORS.invalidRequest,
                { issues: [{ path: 'target', message: `must be ${b.target} (${b.source})` }] },
                { message: `invalid body: target: must be ${b.target} (${b.source})` },
              )
            }
            target = b.target
          }
        }
        // The write's target is what its route or tool reads off it, as on the proxy; one that
        // reads none has none, whatever the agent names: a grant for one target must not pay for
        // a write to another.
        if (bindings.every((b) => b.target === null)) target = null
        // A request and a tool named together must read the same target (or none): the lease is
        // bound to the request, so a tool's target would let a grant for one pay for a write to
        // another (found in review).
        const [first, second] = bindings
        if (first && second && first.target !== second.target) {
          const said = (b: typeof first) => `${b.source} reads ${b.target === null ? 'none' : b.target}`
          const message = `the request and the tool name different targets: ${said(first)}, ${said(second)}`
          fail(
            ERRORS.invalidRequest,
            { issues: [{ path: 'target', message }] },
            { message: `invalid body: target: ${message}` },
          )
        }
        return target
      }

      const systemId = request?.systemId ?? toolRef?.system.systemId ?? null
      const binding = request ? requestBinding(request.method, request.path, request.body) : null
      const answer = await deps.writes.run<Refused>({
        tenantId: caller.tenantId,
        keyId: caller.keyId,
        environment: environment as Environment | null,
        grantId: body.grantId ?? null,
        via: 'api',
        chargeQuota: true,
        verb: body.verb,
        target: body.target ?? null,
        systemId,
        recorder: 'audit',
        // A refusal rests on the tenant's current version (confirm), never on an old route table.
        plan: (snap) => {
          try {
            return { kind: 'decide', verb: body.verb, target: targetUnder(snap), systemId, context: null }
          } catch (err) {
            if (err instanceof WriteGateError) return { kind: 'settle', confirm: true, context: err }
            throw err
          }
        },
        // An ALLOW's token, and its lease when the check named a request: bound to that request.
        onAllow: (outcome, plan, at) => {
          const target = plan.target
          const expiresAt = at + deps.allowTtlSeconds
          const jti = request ? newId('lease') : newId('token')
          const detail: Record<string, unknown> = { tokenId: jti }
          const answer: Record<string, unknown> = { expiresAt }
          let lease: AllowExtras['lease'] = null
          if (request && binding) {
            lease = {
              leaseId: jti,
              tenantId: caller.tenantId,
              keyId: caller.keyId,
              principalId: outcome.principalId ?? caller.principalId,
              verb: outcome.verb,
              target,
              systemId: request.systemId,
              binding,
              createdAt: at,
              expiresAt,
            }
            answer.leaseId = jti
            detail.leaseId = jti
            detail.request = {
              systemId: request.systemId,
              method: request.method,
              path: request.path,
              bodySha256: request.body === undefined ? null : sha256Hex(canonicalJson(request.body)),
            }
          }
          answer.token = signAllowToken(keyring.tokenSigning, {
            v: 1,
            tid: caller.tenantId,
            kid: caller.keyId,
            pid: outcome.principalId ?? caller.principalId,
            verb: outcome.verb,
            tgt: target,
            env: environment,
            iat: at,
            exp: expiresAt,
            jti,
            bind: request && binding ? { sys: request.systemId, h: binding } : null,
          })
          return { detail, lease, answer }
        },
        // A STEP_UP with a tool stages the call for a human's approval.
        ...(toolRef && body.tool
          ? {
              stage: (outcome, plan, checkReceiptId) =>
                stager.stage({
                  tenantId: caller.tenantId,
                  ref: toolRef,
                  params: (body.tool as ToolCall).params,
                  verb: outcome.verb,
                  target: plan.target,
                  environment,
                  principalId: outcome.principalId ?? caller.principalId,
                  principalName: outcome.principalName,
                  keyId: caller.keyId,
                  stateVersion: outcome.policyVersion,
                  cause: { checkReceiptId },
                }),
            }
          : {}),
      })
      if (answer.kind === 'refused') fail(answer.refusal.def, answer.refusal.detail)
      // Settled only by a refusal the plan read under the current snapshot.
      if (answer.kind === 'settled' && answer.context) throw answer.context
      if (answer.kind !== 'decided') fail(ERRORS.gateUnavailable)
      const { outcome } = answer
      return {
        decision: outcome.decision,
        receiptId: answer.receiptId,
        seq: answer.seq as number,
        verb: outcome.verb,
        requestedVerb: body.verb,
        mode: outcome.mode,
        provenance: outcome.provenance,
        policyVersion: outcome.policyVersion,
        reason: outcome.reason,
        ...(outcome.grantId ? { grantId: outcome.grantId } : {}),
        ...answer.extras,
        ...(answer.actionId ? { actionId: answer.actionId } : {}),
      }
    },
  }
}
