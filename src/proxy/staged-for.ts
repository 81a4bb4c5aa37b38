import type { StagedFor } from '../actions/action-stager.js'
import type { Outcome } from '../core/evaluate.js'
import type { Environment } from '../core/verbs.js'
import type { DecidedPlan } from '../gate/gated-write.js'
import type { ProxyContext } from './request-plan.js'

/**
 * Who and what a STEP_UP the proxy stages is for (a plain HTTP write or one call of an MCP or
 * GraphQL request): the decision's subject, under the plan it was decided under.
 */
export function stagedFor(
  tenant: { tenantId: string; keyId: string },
  environment: Environment | null,
  outcome: Outcome,
  plan: DecidedPlan<ProxyContext>,
  checkReceiptId: string,
  at: number,
): StagedFor {
  const system = (plan.context as Extract<ProxyContext, { kind: 'write' }>).system
  return {
    tenantId: tenant.tenantId,
    systemId: plan.systemId ?? system.systemId,
    systemVersion: system.version,
    verb: outcome.verb,
    target: plan.target,
    environment,
    principalId: outcome.principalId ?? '',
    principalName: outcome.principalName,
    keyId: tenant.keyId,
    stateVersion: outcome.policyVersion,
    checkReceiptId,
    at,
  }
}
