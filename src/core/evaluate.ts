import type { Layer, LayerStack } from './policy-layers.js'
import { resolveMode } from './policy-layers.js'
import type { Provenance, Reason } from './reasons.js'
import { type CompiledSnapshot, SETTLED_LIMIT, type SnapshotGrant } from './snapshot.js'
import type { Environment, Mode } from './verbs.js'

export type Decision = 'ALLOW' | 'DENY' | 'STEP_UP'

export interface CheckInput {
  keyId: string
  /** As the caller sent it; may be a deprecated alias. */
  verb: string
  target: string | null
  environment: Environment | null
  /** A grant the caller presents; tried first when the mode is require_grant. */
  grantId: string | null
}

export interface Outcome {
  decision: Decision
  verb: string
  requestedVerb: string
  mode: Mode | null
  provenance: Provenance
  reason: Reason
  /** The tenant's decision-state version the decision was made under. */
  policyVersion: number
  principalId: string | null
  principalName: string | null
  /** Versions of the layers that were folded, for the receipt. */
  layers: Partial<Record<Layer, number>>
  grantId: string | null
}

export type Evaluation =
  | { kind: 'unknown_verb'; verb: string }
  | { kind: 'decided'; outcome: Outcome }
  /** require_grant: ALLOW if the commit consumes one of `candidates` (best first), else `otherwise`. */
  | { kind: 'needs_grant'; candidates: GrantCandidate[]; otherwise: Outcome }

/** A grant the commit may consume; its expiry bounds how long the consumption marker is kept. */
export interface GrantCandidate {
  grantId: string
  expiresAt: number
}

function grantMatches(g: SnapshotGrant, principalId: string, input: CheckInput, nowSeconds: number): boolean {
  return (
    g.expiresAt > nowSeconds &&
    (g.target === null || g.target === input.target) &&
    (g.principalId === null || g.principalId === principalId) &&
    (g.environment === null || g.environment === input.environment)
  )
}

/**
 * The decision, as a pure function of the request and the snapshot (contract §3 order):
 * 1. key revoked, principal disabled or deleted → DENY;
 * 2. on the sponsor roster (key, principal or tenant) → DENY;
 * 3. the effective mode: allow, deny, require_grant (with grant consumption) or step_up.
 * Unknown verbs are rejected before any of this, so they are never decided or receipted.
 */
export function evaluate(snap: CompiledSnapshot, input: CheckInput, nowSeconds: number): Evaluation {
  // Outside require_grant the answer is fixed by the snapshot, key, verb and environment, so
  // it is kept on the (immutable) snapshot; frozen, since every caller shares it.
  const id = `${input.keyId}\u0000${input.verb}\u0000${input.environment ?? '\u0001'}`
  const settled = snap.settled.get(id)
  if (settled) return settled
  const evaluation = evaluateAfresh(snap, input, nowSeconds)
  if (evaluation.kind === 'decided' && evaluation.outcome.mode !== 'require_grant') {
    if (snap.settled.size >= SETTLED_LIMIT) {
      const oldest = snap.settled.keys().next()
      if (!oldest.done) snap.settled.delete(oldest.value)
    }
    Object.freeze(evaluation.outcome.layers)
    Object.freeze(evaluation.outcome)
    snap.settled.set(id, Object.freeze(evaluation))
  }
  return evaluation
}

function evaluateAfresh(snap: CompiledSnapshot, input: CheckInput, nowSeconds: number): Evaluation {
  const resolved = snap.vocab.resolve(input.verb)
  if (!resolved) return { kind: 'unknown_verb', verb: input.verb }
  const key = snap.raw.keys[input.keyId]
  const principalId = key?.principalId ?? null
  const principal = principalId ? snap.raw.principals[principalId] : undefined

  const base = {
    verb: resolved.canonical,
    requestedVerb: input.verb,
    policyVersion: snap.version,
    principalId,
    principalName: principal?.name ?? null,
    grantId: null,
  }
  const deny = (
    provenance: Provenance,
    reason: Reason,
    mode: Mode | null = null,
    layers: Outcome['layers'] = {},
  ): Evaluation => ({
    kind: 'decided',
    outcome: { ...base, decision: 'DENY', mode, provenance, reason, layers },
  })

  const barred = standingOf(snap, input.keyId)
  if (barred || !principalId) return deny(barred?.provenance ?? 'revocation', barred?.reason ?? 'key_unknown')

  const stack: LayerStack = {
    tenant: snap.raw.policies.tenant,
    environment: input.environment ? snap.raw.policies.environments[input.environment] : undefined,
    principal: snap.raw.policies.principals[principalId],
  }
  const layers: Outcome['layers'] = { tenant: stack.tenant.version }
  if (input.environment) layers.environment = stack.environment?.version ?? 0
  layers.principal = stack.principal?.version ?? 0
  const { mode, provenance } = resolveMode(snap.vocab, stack, resolved.canonical)
  const decided = (decision: Outcome['decision'], reason: Reason): Evaluation => ({
    kind: 'decided',
    outcome: { ...base, decision, mode, provenance, reason, layers },
  })

  switch (mode) {
    case 'allow':
      return decided('ALLOW', 'policy_allow')
    case 'deny':
      return decided('DENY', 'policy_deny')
    case 'step_up':
      return decided('STEP_UP', 'step_up_required')
    case 'require_grant': {
      const matching = snap
        .grantsFor(resolved.canonical)
        .filter((g) => grantMatches(g, principalId, input, nowSeconds))
      const presented = matching.filter((g) => g.grantId === input.grantId)
      const candidates = [...presented, ...matching.filter((g) => g.grantId !== input.grantId)].map(
        (g): GrantCandidate => ({ grantId: g.grantId, expiresAt: g.expiresAt }),
      )
      const otherwise = decided('DENY', 'grant_required')
      if (candidates.length === 0 || otherwise.kind !== 'decided') return otherwise
      return { kind: 'needs_grant', candidates, otherwise: otherwise.outcome }
    }
  }
}

export interface Barred {
  reason: Reason
  provenance: Provenance
}

/**
 * Steps 1 and 2 of the evaluation order alone: may this key act at all? Null when it may.
 * Execute and approvals use it to refuse a write whose key was revoked after its ALLOW.
 */
export function standingOf(snap: CompiledSnapshot, keyId: string): Barred | null {
  const key = snap.raw.keys[keyId]
  const principal = key ? snap.raw.principals[key.principalId] : undefined
  if (!key || !principal) return { reason: 'key_unknown', provenance: 'revocation' }
  if (key.revoked) return { reason: 'key_revoked', provenance: 'revocation' }
  if (principal.deleted) return { reason: 'principal_deleted', provenance: 'principal_inactive' }
  if (principal.disabled) return { reason: 'principal_disabled', provenance: 'principal_inactive' }
  if (snap.raw.roster.all) return { reason: 'sponsor_revoked_tenant', provenance: 'revocation' }
  if (snap.rosterPrincipals.has(key.principalId))
    return { reason: 'sponsor_revoked_principal', provenance: 'revocation' }
  if (snap.rosterKeys.has(keyId)) return { reason: 'sponsor_revoked_key', provenance: 'revocation' }
  return null
}

/** The final outcome once the commit has (or has not) consumed a grant. */
export function settleGrant(
  evaluation: Exclude<Evaluation, { kind: 'unknown_verb' }>,
  consumedGrantId: string | null,
): Outcome {
  if (evaluation.kind === 'decided') return evaluation.outcome
  if (consumedGrantId === null) return evaluation.otherwise
  return {
    ...evaluation.otherwise,
    decision: 'ALLOW',
    provenance: 'grant',
    reason: 'grant_consumed',
    grantId: consumedGrantId,
  }
}
