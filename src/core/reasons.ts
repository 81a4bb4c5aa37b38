/**
 * Every decision carries one of these stable reasons. docs/decisions.md documents each,
 * and a test keeps the two in step.
 */
export const REASONS = {
  key_unknown: 'The key is not in the decision snapshot (it was never issued to this tenant).',
  key_revoked: 'The API key was revoked.',
  principal_disabled: "The key's principal is disabled.",
  principal_deleted: "The key's principal is deleted (tombstoned).",
  sponsor_revoked_tenant: 'The sponsor revoked every agent of the tenant (kill switch).',
  sponsor_revoked_principal: "The sponsor revoked the key's principal (kill switch).",
  sponsor_revoked_key: 'The sponsor revoked this key (kill switch).',
  policy_allow: 'The effective mode is allow.',
  policy_deny: 'The effective mode is deny.',
  grant_required: 'The effective mode is require_grant and no live matching grant exists.',
  grant_consumed: 'The effective mode is require_grant and a matching grant was consumed.',
  step_up_required: 'The effective mode is step_up: a human must approve with a TOTP code.',
} as const

export type Reason = keyof typeof REASONS

/**
 * Why a gated execution (`POST /v1/execute`, the write of an approved action) failed closed:
 * the `reason` of its EXECUTE receipt with decision DENY, and of the `{ok: false}` answer. One
 * registry with the decision reasons; docs/decisions.md documents each, and a test keeps the
 * two in step.
 */
export const EXECUTE_REASONS = {
  lease_unknown: "No such lease in the caller's tenant (another tenant's lease included).",
  lease_used: "The lease (or the token's lease) was consumed already.",
  lease_expired: 'The lease has expired.',
  lease_mismatch: 'Method, path, body or system differ from what the lease is bound to.',
  token_invalid: 'The ALLOW token is malformed, badly signed, of another tenant, expired or unbound.',
  revoked: "The lease's key or the caller's key is revoked, disabled, deleted or on the sponsor's roster.",
  gate_error: 'The hot store could not confirm standing, or the authorising transaction failed.',
  credential_unavailable: "The process cannot resolve the system's credential reference; nothing was sent.",
} as const

export type ExecuteReason = keyof typeof EXECUTE_REASONS

/** Where a decision came from (contract §3). */
export type Provenance =
  | 'principal'
  | 'environment'
  | 'tenant'
  | 'revocation'
  | 'principal_inactive'
  | 'grant'
  | 'quota'
