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

/** Where a decision came from (contract §3). */
export type Provenance =
  | 'principal'
  | 'environment'
  | 'tenant'
  | 'revocation'
  | 'principal_inactive'
  | 'grant'
  | 'quota'
