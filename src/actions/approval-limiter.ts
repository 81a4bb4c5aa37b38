import type { Clock } from '../core/clock.js'
import { ERRORS, fail } from '../core/errors.js'
import type { RateLimitStore } from '../store/ports/rate-limit.js'

export interface ApprovalLimits {
  codeAttemptsPerAction: number
  actionWindowSeconds: number
  codeAttemptsPerTenant: number
  tenantWindowSeconds: number
}

export interface ApprovalLimiter {
  /** Reserves one code check for the action and its tenant, or refuses with 429 approval_locked. */
  reserve(tenantId: string, actionId: string): Promise<void>
}

/**
 * Brute-force guard on approval codes, in the shared RateLimitStore so it holds across
 * replicas. A slot is taken before the code is checked, never after: parallel guesses cannot
 * outrun the limit. A right code ends the action (it is approved), so per action the slots
 * are in effect wrong codes: five lock it for the window. The tenant bucket is separate and
 * counts every code checked for any of its actions.
 */
export function createApprovalLimiter(deps: {
  store: RateLimitStore
  clock: Clock
  limits: ApprovalLimits
}): ApprovalLimiter {
  const { store, clock, limits } = deps
  const locked = (scope: 'action' | 'tenant', retryAfter: number): never =>
    fail(ERRORS.approvalLocked, { scope, retryAfter }, { headers: { 'Retry-After': String(retryAfter) } })

  return {
    async reserve(tenantId, actionId) {
      const now = clock.nowMs()
      const action = await store.hit(
        `approve:action:${actionId}`,
        limits.codeAttemptsPerAction,
        limits.actionWindowSeconds,
        now,
      )
      if (!action.allowed) locked('action', action.retryAfterSeconds)
      const tenant = await store.hit(
        `approve:tenant:${tenantId}`,
        limits.codeAttemptsPerTenant,
        limits.tenantWindowSeconds,
        now,
      )
      if (!tenant.allowed) locked('tenant', tenant.retryAfterSeconds)
    },
  }
}
