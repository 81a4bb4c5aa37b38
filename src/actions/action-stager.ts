import { createHash } from 'node:crypto'
import type { Clock } from '../core/clock.js'
import { nowSeconds } from '../core/clock.js'
import { ERRORS, fail } from '../core/errors.js'
import { newId } from '../core/ids.js'
import { draft, type ReceiptDraft } from '../core/receipt.js'
import { withUnsendableEncoded } from '../execute/upstream-url.js'
import type { PendingAction } from '../store/ports/decision-state.js'
import type { SystemsRegistry, ToolRef } from '../systems/systems-registry.js'
import { HTTP_REPLAY_TOOL, type HttpReplayParams } from './staged-request.js'

export const ACTION_TTL_SECONDS = 15 * 60

export interface ToolCall {
  name: string
  params: Record<string, unknown>
}

export interface StagedAction {
  action: PendingAction
  receipt: ReceiptDraft
}

/** A request as the proxy received it, to be replayed byte for byte on approval (tool `@http`). */
export interface StagedRequest {
  method: string
  path: string
  contentType: string | null
  /** The exact body, or null when it was not read (the state changed between prediction and decision). */
  body: Buffer | null
  /** Protocol headers to replay (REPLAYED_HEADERS only). */
  headers?: Record<string, string> | undefined
}

/** Who and what a staged write is for: the decision's subject, as its receipts record it. */
export interface StagedFor {
  tenantId: string
  systemId: string
  /** The system's version in the snapshot decided under (0: a routes file's, unversioned). */
  systemVersion: number
  verb: string
  target: string | null
  environment: string | null
  principalId: string
  principalName: string | null
  keyId: string
  stateVersion: number
  checkReceiptId: string
  at: number
}

/**
 * A STEP_UP write the proxy (HTTP or a body-aware route) stages: the pending action holds the
 * exact bytes to replay; its ACTION_STAGED receipt records only their digest and size.
 */
export function stageHttpRequest(
  f: StagedFor,
  request: StagedRequest,
  extraDetail: Record<string, unknown> = {},
): StagedAction {
  const bytes = request.body ?? Buffer.alloc(0)
  const sha256 = createHash('sha256').update(bytes).digest('hex')
  const actionId = newId('action')
  const params: HttpReplayParams = {
    method: request.method,
    path: withUnsendableEncoded(request.path),
    contentType: request.contentType,
    body: bytes.toString('base64'),
    bodySha256: sha256,
    bodyCaptured: request.body !== null,
    ...(request.headers && Object.keys(request.headers).length > 0 ? { headers: request.headers } : {}),
  }
  const receipt = draft({
    receiptId: newId('receipt'),
    tenantId: f.tenantId,
    kind: 'ACTION_STAGED',
    createdAt: f.at,
    verb: f.verb,
    target: f.target,
    environment: f.environment,
    principalId: f.principalId,
    principalName: f.principalName,
    keyId: f.keyId,
    policyVersion: f.stateVersion,
    detail: {
      actionId,
      systemId: f.systemId,
      tool: HTTP_REPLAY_TOOL,
      request: {
        method: params.method,
        path: params.path,
        contentType: params.contentType,
        bodySha256: sha256,
        bodyBytes: bytes.length,
      },
      ...extraDetail,
      expiresAt: f.at + ACTION_TTL_SECONDS,
      checkReceiptId: f.checkReceiptId,
    },
  })
  const action: PendingAction = {
    actionId,
    tenantId: f.tenantId,
    systemId: f.systemId,
    tool: HTTP_REPLAY_TOOL,
    params,
    verb: f.verb,
    target: f.target,
    environment: f.environment,
    principalId: f.principalId,
    keyId: f.keyId,
    stagedReceiptId: receipt.receiptId,
    createdAt: f.at,
    expiresAt: f.at + ACTION_TTL_SECONDS,
    systemVersion: f.systemVersion > 0 ? f.systemVersion : null,
  }
  return { action, receipt }
}

export interface ActionStager {
  /** Resolves and validates a tool call before any decision is made (bad input writes no receipt). */
  resolve(tenantId: string, call: ToolCall): Promise<ToolRef>
  /** The pending action and its ACTION_STAGED receipt, for the caller to store in one transaction. */
  stage(input: {
    tenantId: string
    ref: ToolRef
    params: Record<string, unknown>
    verb: string
    target: string | null
    environment: string | null
    principalId: string
    principalName: string | null
    keyId: string
    stateVersion: number
    cause:
      | { checkReceiptId: string }
      | { proxy: { method: string; path: string } }
      /** An undo, staged by the approval of `actionId` whose write `executeReceiptId` authorised. */
      | { revertOf: { actionId: string; executeReceiptId: string } }
  }): StagedAction
}

export function createActionStager(deps: { systems: SystemsRegistry; clock: Clock }): ActionStager {
  return {
    async resolve(tenantId, call) {
      const ref = await deps.systems.tool(tenantId, call.name)
      if (!ref) fail(ERRORS.unknownTool, { tool: call.name })
      const v = ref.validate(call.params)
      if (!v.ok) fail(ERRORS.invalidParams, { tool: call.name, issues: v.issues })
      return ref
    },
    stage(input) {
      const at = nowSeconds(deps.clock)
      const actionId = newId('action')
      const receipt = draft({
        receiptId: newId('receipt'),
        tenantId: input.tenantId,
        kind: 'ACTION_STAGED',
        decision: null,
        createdAt: at,
        verb: input.verb,
        target: input.target,
        environment: input.environment,
        principalId: input.principalId,
        principalName: input.principalName,
        keyId: input.keyId,
        policyVersion: input.stateVersion,
        detail: {
          actionId,
          systemId: input.ref.system.systemId,
          tool: input.ref.tool.name,
          params: input.params,
          expiresAt: at + ACTION_TTL_SECONDS,
          ...input.cause,
        },
      })
      const action: PendingAction = {
        actionId,
        tenantId: input.tenantId,
        systemId: input.ref.system.systemId,
        tool: input.ref.tool.name,
        params: input.params,
        verb: input.verb,
        target: input.target,
        environment: input.environment,
        principalId: input.principalId,
        keyId: input.keyId,
        stagedReceiptId: receipt.receiptId,
        createdAt: at,
        expiresAt: at + ACTION_TTL_SECONDS,
        revertOf: 'revertOf' in input.cause ? input.cause.revertOf.actionId : null,
        systemVersion: input.ref.system.version > 0 ? input.ref.system.version : null,
      }
      return { action, receipt }
    },
  }
}
