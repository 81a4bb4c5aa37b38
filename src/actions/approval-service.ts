import type { AuditLog } from '../audit/audit-log.js'
import { signAllowToken } from '../core/allow-token.js'
import type { Clock } from '../core/clock.js'
import { nowSeconds } from '../core/clock.js'
import { ERRORS, fail, WriteGateError } from '../core/errors.js'
import type { Outcome } from '../core/evaluate.js'
import { newId } from '../core/ids.js'
import { nestedDeeperThan } from '../core/json-depth.js'
import { rawRequestBinding, requestBinding } from '../core/lease-binding.js'
import { draft, type Receipt } from '../core/receipt.js'
import { isEnvironment } from '../core/verbs.js'
import type { ExecuteResult, ExecuteService } from '../execute/execute-service.js'
import { isTimeout } from '../execute/upstream-client.js'
import type { Gate, GateRequest, GateResult } from '../gate/gate.js'
import type { KeyCaller } from '../identity/caller.js'
import type { Logger } from '../observability/logger.js'
import type { Keyring } from '../security/keyring.js'
import type { ActionPosition, PendingAction, SystemOfRecord } from '../store/ports/index.js'
import type { SystemsRegistry, ToolRef } from '../systems/systems-registry.js'
import { ACTION_TTL_SECONDS, type ActionStager } from './action-stager.js'
import type { ApprovalLimiter } from './approval-limiter.js'
import { fillText } from './param-template.js'
import { type ReadableRequest, readableRequest } from './readable-request.js'
import { HTTP_REPLAY_TOOL, replayRequest } from './replay-request.js'
import { planRevert } from './revert-plan.js'
import type { StepUpProof, StepUpVerifier, Verification } from './step-up-verifier.js'
import { type ToolRequest, toolRequest } from './tool-request.js'

export interface ApprovalInput {
  totpCode?: string | undefined
  params?: Record<string, unknown> | undefined
}

/** The receipt an approval answers with (docs/execute.md "Approval response"). */
export interface ApprovalReceipt {
  receiptId: string
  seq: number
  kind: string
  decision: string | null
  createdAt: number
  hash: string
  /** The EXECUTE receipt that authorised (or refused) the write. */
  executeReceiptId: string | null
  /** The EXECUTE receipt of the upstream's outcome. */
  outcomeReceiptId: string | null
}

export type ApprovalResult =
  | {
      ok: boolean
      upstreamCalled: true
      status: number
      contentType: string | null
      /** Parsed JSON when the upstream said JSON, else the text. */
      body: unknown
      latencyMs: number
    }
  | { ok: false; upstreamCalled: false; reason: string }
  | {
      ok: false
      upstreamCalled: boolean
      status: number | null
      failure: string
      timeout: boolean
      latencyMs: number
    }

export interface ApprovalResponse {
  type: 'executed' | 'denied' | 'upstream_error'
  message: string
  result: ApprovalResult
  receipt: ApprovalReceipt
  revertActionId: string | null
  revertMessage: string | null
}

export interface PublicAction {
  actionId: string
  systemId: string
  tool: string
  verb: string
  target: string | null
  environment: string | null
  params: Record<string, unknown>
  principalId: string
  keyId: string
  stagedReceiptId: string
  revertOf: string | null
  createdAt: number
  expiresAt: number
  /** A request the proxy staged (tool `@http`), readable: null for a tool call (its params say it all). */
  request: ReadableRequest | null
}

/** One page of pending actions; `next` is where the following page starts, null after the last. */
export interface ActionPage {
  actions: PublicAction[]
  next: ActionPosition | null
}

export interface ApprovalService {
  list(caller: KeyCaller, page: { limit: number; after?: ActionPosition }): Promise<ActionPage>
  /** One pending, unexpired action of the caller's tenant; 404 action_not_found otherwise. */
  get(caller: KeyCaller, actionId: string): Promise<PublicAction>
  approve(caller: KeyCaller, actionId: string, input: ApprovalInput): Promise<ApprovalResponse>
  /**
   * A human refuses the write: the action is deleted (it never runs) and an ACTION_DISMISSED
   * receipt says who refused it and why, in one transaction. 404 action_not_found when it is
   * gone (approved, dismissed or expired).
   */
  dismiss(caller: KeyCaller, actionId: string, reason: string | null): Promise<ApprovalReceipt>
}

const publicAction = (a: PendingAction): PublicAction => ({
  actionId: a.actionId,
  systemId: a.systemId,
  tool: a.tool,
  verb: a.verb,
  target: a.target,
  environment: a.environment,
  params: a.params,
  principalId: a.principalId,
  keyId: a.keyId,
  stagedReceiptId: a.stagedReceiptId,
  revertOf: a.revertOf ?? null,
  createdAt: a.createdAt,
  expiresAt: a.expiresAt,
  request: readableRequest(a),
})

const summary = (
  r: Receipt,
  executeReceiptId: string | null,
  outcomeReceiptId: string | null,
): ApprovalReceipt => ({
  receiptId: r.receiptId,
  seq: r.seq,
  kind: r.kind,
  decision: r.decision,
  createdAt: r.createdAt,
  hash: r.hash,
  executeReceiptId,
  outcomeReceiptId,
})

/** The upstream's answer as JSON when it is; as its text when not, or when too deep to serialise back. */
function parseBody(contentType: string | null, body: Buffer): unknown {
  const text = body.toString('utf8')
  if (contentType && /\bjson\b/i.test(contentType)) {
    try {
      const value: unknown = JSON.parse(text)
      return nestedDeeperThan(value) ? text : value
    } catch {
      return text
    }
  }
  return text
}

/** The write an approval will make, and what its ACTION_APPROVED receipt says about it. */
interface WritePlan {
  /** The enrolled tool; null for a write the proxy staged (replayed byte for byte). */
  ref: ToolRef | null
  params: Record<string, unknown>
  target: string | null
  request: ToolRequest & {
    replay?: { bytes: Buffer; contentType: string | null; headers: Record<string, string> }
  }
  detail: Record<string, unknown>
}

/** Keys a params edit may name: the schema's declared properties, when it declares any. */
function unknownKeys(
  ref: ToolRef,
  staged: Record<string, unknown>,
  edits: Record<string, unknown>,
): string[] {
  const props = (ref.tool.params as { properties?: unknown }).properties
  if (!props || typeof props !== 'object') return []
  return Object.keys(edits).filter((k) => !Object.hasOwn(props, k) && !Object.hasOwn(staged, k))
}

/**
 * POST /v1/agent/actions/{id}/approve, in order: params edits (re-validated), the policy
 * re-check through the gate (no quota), the TOTP or backup code when the re-check still says
 * STEP_UP, a fresh ALLOW token for the write verified by the execute pipeline (standing of the
 * action's key and the approver's, linearizable), and the write through the same upstream
 * client as /v1/execute. The action is claimed (deleted) in the transaction that makes the
 * write's receipts durable, so two concurrent approvals make one upstream call.
 */
export function createApprovalService(deps: {
  sor: SystemOfRecord
  audit: AuditLog
  gate: Gate
  clock: Clock
  keyring: Keyring
  systems: SystemsRegistry
  stager: ActionStager
  execute: ExecuteService
  verifier: StepUpVerifier
  limiter: ApprovalLimiter
  logger: Logger
  allowTtlSeconds: number
}): ApprovalService {
  const { sor, audit, gate, clock, keyring, systems, stager, execute, verifier, limiter, logger } = deps

  async function live(tenantId: string, actionId: string): Promise<PendingAction> {
    const action = await sor.stores.actions.get(tenantId, actionId)
    if (!action || action.expiresAt <= nowSeconds(clock)) fail(ERRORS.actionNotFound, { actionId })
    return action
  }

  /** Step 1: the params to write, with any edits merged and checked like a staged call. */
  function finalParams(ref: ToolRef, action: PendingAction, edits: Record<string, unknown> | undefined) {
    if (!edits) return action.params
    const unknown = unknownKeys(ref, action.params, edits)
    if (unknown.length > 0)
      fail(ERRORS.invalidParams, {
        tool: ref.tool.name,
        issues: unknown.map((k) => ({ path: k, message: `unknown key ${k}` })),
      })
    const merged = { ...action.params, ...edits }
    const v = ref.validate(merged)
    if (!v.ok) fail(ERRORS.invalidParams, { tool: ref.tool.name, issues: v.issues })
    return merged
  }

  /** Step 1 for both kinds of action: a tool call (editable) or a proxy-staged request (not). */
  async function plan(action: PendingAction, input: ApprovalInput): Promise<WritePlan> {
    if (action.tool === HTTP_REPLAY_TOOL) {
      const issue = (message: string) =>
        fail(ERRORS.invalidParams, { tool: action.tool, issues: [{ path: '', message }] })
      if (input.params && Object.keys(input.params).length > 0)
        issue('a request staged by the proxy is replayed as it was sent and cannot be edited')
      const replay = replayRequest(action.params)
      if (!replay.ok) return issue(replay.problem)
      return {
        ref: null,
        params: action.params,
        target: action.target,
        request: {
          method: replay.method,
          path: replay.path,
          body: undefined,
          replay: { bytes: replay.bytes, contentType: replay.contentType, headers: replay.headers },
        },
        // The audit log keeps the request's digest, never its body.
        detail: {
          request: {
            method: replay.method,
            path: replay.path,
            contentType: replay.contentType,
            bodySha256: action.params.bodySha256,
            bodyBytes: replay.bytes.length,
          },
        },
      }
    }
    const ref = await systems.toolOf(action.tenantId, action.systemId, action.tool)
    if (!ref) fail(ERRORS.unknownTool, { tool: action.tool })
    const params = finalParams(ref, action, input.params)
    // Read as /v1/check reads it: a template the edited params no longer fill gives no target,
    // never the staged one, which a grant for that target would pay for (found in review).
    const target = ref.tool.target ? fillText(ref.tool.target, { params }) : null
    const built = toolRequest(ref.tool, params)
    if (!built.ok)
      fail(ERRORS.invalidParams, { tool: ref.tool.name, issues: [{ path: '', message: built.problem }] })
    return {
      ref,
      params,
      target,
      request: { method: built.method, path: built.path, body: built.body },
      detail: { params, editedParams: Object.keys(input.params ?? {}) },
    }
  }

  /** What every receipt of an approval's policy re-check records: who approved, and under what. */
  function recheckedFields(
    caller: KeyCaller,
    action: PendingAction,
    target: string | null,
    outcome: Outcome,
    at: number,
  ) {
    return {
      receiptId: newId('receipt'),
      tenantId: caller.tenantId,
      createdAt: at,
      verb: outcome.verb,
      requestedVerb: action.verb,
      target,
      environment: action.environment,
      principalId: caller.principalId,
      principalName: caller.principalName,
      keyId: caller.keyId,
      reason: outcome.reason,
      policyVersion: outcome.policyVersion,
    }
  }

  async function denied(
    caller: KeyCaller,
    action: PendingAction,
    request: ToolRequest,
    target: string | null,
    outcome: Outcome,
  ): Promise<ApprovalResponse> {
    const d = draft({
      ...recheckedFields(caller, action, target, outcome, nowSeconds(clock)),
      kind: 'EXECUTE',
      decision: 'DENY',
      detail: {
        phase: 'refused',
        via: 'approval',
        actionId: action.actionId,
        systemId: action.systemId,
        tool: action.tool,
        method: request.method,
        path: request.path,
        agent: { keyId: action.keyId, principalId: action.principalId },
        recheck: { decision: outcome.decision, mode: outcome.mode, provenance: outcome.provenance },
        upstreamCalled: false,
      },
    })
    let receipt: Receipt | undefined
    try {
      ;[receipt] = await audit.append([d])
    } catch (err) {
      logger.error({ err, tenantId: caller.tenantId }, 'approval: the refusal receipt could not be written')
    }
    // Nothing was written upstream either way; without the receipt, say the gate is unavailable.
    if (!receipt) fail(ERRORS.gateUnavailable, { reason: 'gate_unavailable' })
    return {
      type: 'denied',
      message: `Not executed: the policy re-check now decides DENY (${outcome.reason}). The action stays pending until it expires.`,
      result: { ok: false, upstreamCalled: false, reason: outcome.reason },
      receipt: summary(receipt, receipt.receiptId, null),
      revertActionId: null,
      revertMessage: null,
    }
  }

  /**
   * Gives back a grant the re-check consumed for a write that did not go out: first its
   * consumption on record in Postgres (when the claim committed it, under `recordedBy`), then
   * in the hot store. If the record cannot be undone the grant stays used: closed, not twice usable.
   */
  async function giveBackGrant(
    req: GateRequest,
    decided: Extract<GateResult, { kind: 'decided' }>,
    recordedBy: string | null,
  ): Promise<void> {
    const grantId = decided.outcome.grantId
    if (!grantId) return
    try {
      if (recordedBy) await sor.stores.grants.unmarkConsumed(req.tenantId, grantId, recordedBy)
      await gate.release(req, decided)
    } catch (err) {
      logger.warn({ err, tenantId: req.tenantId, grantId }, 'approval: grant not given back')
    }
  }

  /** Stages the undo of a successful write; a failure to stage it never undoes the answer. */
  async function stageRevert(
    ref: ToolRef,
    action: PendingAction,
    params: Record<string, unknown>,
    result: unknown,
    outcome: Outcome,
    executeReceiptId: string,
  ): Promise<{ revertActionId: string | null; revertMessage: string | null }> {
    const plan = await planRevert(systems, ref, params, result)
    if (plan.kind === 'none') return { revertActionId: null, revertMessage: null }
    if (plan.kind === 'impossible')
      return { revertActionId: null, revertMessage: `No undo was staged: ${plan.tool} ${plan.problem}.` }
    // An undo planned from another version than the write's could go elsewhere than the write.
    if (plan.ref.system.version !== ref.system.version)
      return {
        revertActionId: null,
        revertMessage: `No undo was staged: ${ref.system.systemId} changed since the write (version ${ref.system.version}, now ${plan.ref.system.version}).`,
      }
    const target = plan.ref.tool.target ? fillText(plan.ref.tool.target, { params: plan.params }) : null
    const staged = stager.stage({
      tenantId: action.tenantId,
      ref: plan.ref,
      params: plan.params,
      verb: plan.ref.tool.verb,
      target: target ?? action.target,
      environment: action.environment,
      principalId: action.principalId,
      principalName: outcome.principalName,
      keyId: action.keyId,
      stateVersion: outcome.policyVersion,
      cause: { revertOf: { actionId: action.actionId, executeReceiptId } },
    })
    try {
      await sor.transaction(async (stores) => {
        await stores.actions.insert(staged.action)
        await audit.appendWith(stores, [staged.receipt])
      })
    } catch (err) {
      logger.warn({ err, tenantId: action.tenantId, actionId: action.actionId }, 'approval: undo not staged')
      return {
        revertActionId: null,
        revertMessage: `No undo was staged: ${plan.ref.tool.name} could not be saved.`,
      }
    }
    return {
      revertActionId: staged.action.actionId,
      revertMessage: `To undo this write, approve action ${staged.action.actionId} (${plan.ref.tool.name}) within ${ACTION_TTL_SECONDS / 60} minutes.`,
    }
  }

  /**
   * A code refused (wrong, replayed, not enrolled) or not even checked (locked) is on record as
   * APPROVAL_FAILED, so guessing leaves a trail; the answer stays the refusal. The code itself
   * is never in the receipt.
   */
  async function failedAttemptOnRecord<T>(
    caller: KeyCaller,
    action: PendingAction,
    attempt: () => Promise<T>,
  ): Promise<T> {
    try {
      return await attempt()
    } catch (err) {
      if (
        err instanceof WriteGateError &&
        (err.def === ERRORS.totpInvalid ||
          err.def === ERRORS.approvalLocked ||
          err.def === ERRORS.stepUpLocked)
      ) {
        const failure =
          err.def === ERRORS.approvalLocked
            ? 'locked'
            : err.def === ERRORS.stepUpLocked
              ? 'step_up_locked'
              : String(err.detail?.reason ?? 'wrong_code')
        const d = draft({
          receiptId: newId('receipt'),
          tenantId: caller.tenantId,
          createdAt: nowSeconds(clock),
          kind: 'APPROVAL_FAILED',
          verb: action.verb,
          requestedVerb: action.verb,
          target: action.target,
          environment: action.environment,
          principalId: caller.principalId,
          principalName: caller.principalName,
          keyId: caller.keyId,
          detail: {
            actionId: action.actionId,
            systemId: action.systemId,
            tool: action.tool,
            failure,
            code: err.def.code,
            ...(err.def === ERRORS.approvalLocked ? { scope: err.detail?.scope } : {}),
            agent: { keyId: action.keyId, principalId: action.principalId },
          },
        })
        await audit
          .append([d])
          .catch((e) =>
            logger.error(
              { err: e, tenantId: caller.tenantId },
              'approval: the failed attempt could not be recorded',
            ),
          )
      }
      throw err
    }
  }

  return {
    async list(caller, { limit, after }) {
      // One row more than the page says whether another page follows.
      const rows = await sor.stores.actions.list(caller.tenantId, nowSeconds(clock), limit + 1, after)
      const actions = rows.slice(0, limit).map(publicAction)
      const last = actions.at(-1)
      return {
        actions,
        next: rows.length > limit && last ? { createdAt: last.createdAt, actionId: last.actionId } : null,
      }
    },

    async get(caller, actionId) {
      return publicAction(await live(caller.tenantId, actionId))
    },

    async dismiss(caller, actionId, reason) {
      const action = await live(caller.tenantId, actionId)
      const [receipt] = await sor.transaction(async (stores) => {
        if (!(await stores.actions.remove(caller.tenantId, actionId)))
          fail(ERRORS.actionNotFound, { actionId })
        return audit.appendWith(stores, [
          draft({
            receiptId: newId('receipt'),
            tenantId: caller.tenantId,
            createdAt: nowSeconds(clock),
            kind: 'ACTION_DISMISSED',
            decision: 'DENY',
            verb: action.verb,
            requestedVerb: action.verb,
            target: action.target,
            environment: action.environment,
            principalId: caller.principalId,
            principalName: caller.principalName,
            keyId: caller.keyId,
            reason: 'dismissed_by_human',
            detail: {
              actionId,
              systemId: action.systemId,
              tool: action.tool,
              stagedReceiptId: action.stagedReceiptId,
              agent: { keyId: action.keyId, principalId: action.principalId },
              ...(reason ? { note: reason } : {}),
              upstreamCalled: false,
            },
          }),
        ])
      })
      if (!receipt) throw new Error('dismiss: no receipt returned')
      return summary(receipt, null, null)
    },

    async approve(caller, actionId, input) {
      const action = await live(caller.tenantId, actionId)
      // The write goes to the system as it is now: if it changed after staging (another upstream,
      // credential or tool), the approver would authorise something other than what was shown.
      // By the version staged under; an action without one (staged before versions were kept, or
      // under a routes file) by time, which misses a change within its second.
      const system = await systems.system(caller.tenantId, action.systemId)
      const pinned = action.systemVersion ?? null
      if (system && (pinned !== null ? system.version !== pinned : system.updatedAt > action.createdAt))
        fail(ERRORS.actionSystemChanged, {
          actionId,
          systemId: action.systemId,
          systemVersion: system.version,
        })
      // 1. Edits, re-validated; the target follows the params when the tool templates it.
      const { ref, params, target, request, detail } = await plan(action, input)
      // The version checked above is the one written to (execute refuses another): a change
      // landing while the approval runs (the re-check, the code) is refused too, not sent.
      const systemVersion = system?.version
      if (ref && systemVersion !== undefined && ref.system.version !== systemVersion)
        fail(ERRORS.actionSystemChanged, {
          actionId,
          systemId: action.systemId,
          systemVersion: ref.system.version,
        })

      // 2. The policy, again, for the agent's key: no quota is charged for a re-check.
      const gateReq: GateRequest = {
        tenantId: caller.tenantId,
        keyId: action.keyId,
        verb: action.verb,
        target,
        environment:
          action.environment !== null && isEnvironment(action.environment) ? action.environment : null,
        grantId: null,
        systemId: action.systemId,
        chargeQuota: false,
      }
      const decided: GateResult = await gate.decide(gateReq)
      if (decided.kind === 'unknown_verb') fail(ERRORS.unknownVerb, { verbs: [decided.verb] })
      if (decided.kind !== 'decided') fail(ERRORS.gateUnavailable, { reason: 'gate_unavailable' })
      const { outcome } = decided
      if (outcome.decision === 'DENY') return denied(caller, action, request, target, outcome)

      /** Whether the write went out, or may have: then a grant the re-check consumed stays used. */
      let written = false
      /** The receipt a grant's consumption is recorded under in Postgres, once the claim committed. */
      let grantRecordedBy: string | null = null
      try {
        // 3. Step-up, only while the policy still asks for it. The code is checked here and used
        // up only in the transaction that claims the action: an approval that fails before the
        // write is authorised leaves the human's code usable.
        let proof: StepUpProof | null = null
        if (outcome.decision === 'STEP_UP') {
          const code = input.totpCode?.trim()
          if (!code) fail(ERRORS.totpRequired, { actionId })
          proof = await failedAttemptOnRecord(caller, action, async () => {
            await limiter.reserve(caller.tenantId, actionId)
            return verifier.check(caller.tenantId, code)
          })
        }
        const verification: Verification | 'none' = proof?.kind ?? 'none'

        // 4. A fresh ALLOW token for exactly this write, verified by the execute pipeline.
        const at = nowSeconds(clock)
        const token = signAllowToken(keyring.tokenSigning, {
          v: 1,
          tid: caller.tenantId,
          kid: action.keyId,
          pid: action.principalId,
          verb: outcome.verb,
          tgt: target,
          env: action.environment,
          iat: at,
          exp: at + deps.allowTtlSeconds,
          jti: newId('lease'),
          bind: {
            sys: action.systemId,
            h: request.replay
              ? rawRequestBinding(request.method, request.path, request.replay.bytes)
              : requestBinding(request.method, request.path, request.body),
          },
        })
        const approved = draft({
          ...recheckedFields(caller, action, target, outcome, at),
          kind: 'ACTION_APPROVED',
          detail: {
            actionId,
            systemId: action.systemId,
            tool: action.tool,
            ...detail,
            stagedReceiptId: action.stagedReceiptId,
            agent: { keyId: action.keyId, principalId: action.principalId },
            recheck: {
              decision: outcome.decision,
              mode: outcome.mode,
              provenance: outcome.provenance,
              grantId: outcome.grantId,
            },
            verification,
          },
        })

        // 5. The write: the action is claimed in the transaction that authorises it.
        const result: ExecuteResult = await failedAttemptOnRecord(caller, action, () =>
          execute.execute(
            caller,
            {
              systemId: action.systemId,
              method: request.method,
              path: request.path,
              body: request.body,
              replay: request.replay,
              idempotencyKey: actionId,
              token,
            },
            {
              detail: { actionId },
              ...(systemVersion !== undefined ? { systemVersion } : {}),
              claim: async (stores) => {
                if (!(await stores.actions.remove(caller.tenantId, actionId)))
                  fail(ERRORS.actionNotFound, { actionId })
                if (proof) await verifier.consume(stores, caller.tenantId, proof)
                if (outcome.grantId)
                  await stores.grants.markConsumed(caller.tenantId, outcome.grantId, at, approved.receiptId)
                return [approved]
              },
            },
          ),
        )

        if (result.kind === 'refused')
          return {
            type: 'denied',
            message: `Not executed: ${result.reason}. The action stays pending until it expires.`,
            result: { ok: false, upstreamCalled: false, reason: result.reason },
            receipt: summary(result.receipt, result.receipt.receiptId, null),
            revertActionId: null,
            revertMessage: null,
          }
        // The claim committed: the action is gone, and a grant's consumption is on record.
        if (outcome.grantId) grantRecordedBy = approved.receiptId
        // It went out unless the request provably never left (upstreamCalled: false).
        const neverLeft =
          result.kind === 'upstream_error' && result.upstream.kind === 'failed' && !result.upstream.sent
        written = !neverLeft
        const approvedReceipt =
          result.claimed.find((r) => r.receiptId === approved.receiptId) ?? result.authorized
        const receipt = summary(
          approvedReceipt,
          result.authorized.receiptId,
          result.outcome?.receiptId ?? null,
        )

        if (result.kind === 'upstream_error') {
          // The write's fate is unknown: put the action back, so a retry (same Idempotency-Key) is possible.
          await sor.stores.actions
            .insert(action)
            .catch((err) =>
              logger.warn({ err, tenantId: caller.tenantId, actionId }, 'approval: action not restored'),
            )
          const u = result.upstream
          const failure = u.kind === 'failed' ? u.failure : 'upstream_5xx'
          return {
            type: 'upstream_error',
            message: neverLeft
              ? `The upstream could not be reached (${failure}); the write was not sent. The action is pending again: approving it again retries with the same Idempotency-Key.`
              : `The upstream failed (${failure}${u.status !== null ? `, status ${u.status}` : ''}); the write may or may not have happened. The action is pending again: approving it again retries with the same Idempotency-Key${outcome.grantId ? ', under a new grant (the one it used stays used)' : ''}.`,
            result: {
              ok: false,
              upstreamCalled: u.kind === 'failed' ? u.sent : true,
              status: u.status,
              failure,
              timeout: u.kind === 'failed' && isTimeout(u.failure),
              latencyMs: u.latencyMs,
            },
            receipt,
            revertActionId: null,
            revertMessage: null,
          }
        }

        const u = result.upstream
        const ok = u.status >= 200 && u.status < 300
        const body = parseBody(u.contentType, u.body)
        // Only a tool can name its undo; a replayed proxy write has none.
        const revert =
          ok && ref
            ? await stageRevert(ref, action, params, body, outcome, result.authorized.receiptId)
            : { revertActionId: null, revertMessage: null }
        return {
          type: 'executed',
          message: ok
            ? `Approved: ${action.tool} ran on ${action.systemId} (status ${u.status}).`
            : `Approved and sent: ${action.tool} on ${action.systemId} was answered with status ${u.status}.`,
          result: {
            ok,
            upstreamCalled: true,
            status: u.status,
            contentType: u.contentType,
            body,
            latencyMs: u.latencyMs,
            ...(u.incomplete ? { responseIncomplete: u.incomplete } : {}),
          },
          receipt,
          ...revert,
        }
      } finally {
        // A grant the re-check consumed goes back unless the write it allowed went out, or may have.
        if (!written && outcome.grantId) await giveBackGrant(gateReq, decided, grantRecordedBy)
      }
    },
  }
}
