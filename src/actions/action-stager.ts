import type { Clock } from '../core/clock.js'
import { nowSeconds } from '../core/clock.js'
import { ERRORS, fail } from '../core/errors.js'
import { newId } from '../core/ids.js'
import { draft, type ReceiptDraft } from '../core/receipt.js'
import type { PendingAction } from '../store/ports/decision-state.js'
import type { SystemsRegistry, ToolRef } from '../systems/systems-registry.js'

export const ACTION_TTL_SECONDS = 15 * 60

export interface ToolCall {
  name: string
  params: Record<string, unknown>
}

export interface StagedAction {
  action: PendingAction
  receipt: ReceiptDraft
}

export interface ActionStager {
  /** Resolves and validates a tool call before any decision is made (bad input writes no receipt). */
  resolve(tenantId: string, call: ToolCall): ToolRef
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
    resolve(tenantId, call) {
      const ref = deps.systems.tool(tenantId, call.name)
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
      }
      return { action, receipt }
    },
  }
}
