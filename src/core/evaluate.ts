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

/** What every decision of one known key folds again under a snapshot, computed once per snapshot. */
export interface KeyView {
  principalId: string
  principalName: string | null
  barred: Barred | null
  /** By environment ('' for none): the layer stack and the layer versions a receipt records. */
  stacks: Map<string, { stack: LayerStack; layers: Readonly<Outcome['layers']> }>
}

/** Null for a key the snapshot does not know (never cached: key ids come from callers). */
function keyView(snap: CompiledSnapshot, keyId: string): KeyView | null {
  const cached = snap.keyViews.get(keyId)
  if (cached) return cached
  const key = snap.raw.keys[keyId]
  if (!key) return null
  const view: KeyView = {
    principalId: key.principalId,
    principalName: snap.raw.principals[key.principalId]?.name ?? null,
    barred: standingOf(snap, keyId),
    stacks: new Map(),
  }
  snap.keyViews.set(keyId, view)
  return view
}

function stackOf(snap: CompiledSnapshot, view: KeyView, environment: CheckInput['environment']) {
  const at = environment ?? ''
  let entry = view.stacks.get(at)
  if (!entry) {
    const stack: LayerStack = {
      tenant: snap.raw.policies.tenant,
      environment: environment ? snap.raw.policies.environments[environment] : undefined,
      principal: snap.raw.policies.principals[view.principalId],
    }
    const layers: Outcome['layers'] = { tenant: stack.tenant.version }
    if (environment) layers.environment = stack.environment?.version ?? 0
    layers.principal = stack.principal?.version ?? 0
    entry = { stack, layers: Object.freeze(layers) }
    view.stacks.set(at, entry)
  }
  return entry
}

function outcomeOf(
  snap: CompiledSnapshot,
  input: CheckInput,
  verb: string,
  view: KeyView | null,
  decision: Decision,
  mode: Mode | null,
  provenance: Provenance,
  reason: Reason,
  layers: Outcome['layers'],
): Outcome {
  return {
    decision,
    verb,
    requestedVerb: input.verb,
    mode,
    provenance,
    reason,
    policyVersion: snap.version,
    principalId: view?.principalId ?? null,
    principalName: view?.principalName ?? null,
    layers,
    grantId: null,
  }
}

const NO_LAYERS: Outcome['layers'] = Object.freeze({})

function evaluateAfresh(snap: CompiledSnapshot, input: CheckInput, nowSeconds: number): Evaluation {
  const resolved = snap.vocab.resolve(input.verb)
  if (!resolved) return { kind: 'unknown_verb', verb: input.verb }
  const verb = resolved.canonical
  const view = keyView(snap, input.keyId)
  if (!view || view.barred) {
    const barred = view?.barred
    const provenance = barred?.provenance ?? 'revocation'
    const reason = barred?.reason ?? 'key_unknown'
    return {
      kind: 'decided',
      outcome: outcomeOf(snap, input, verb, view, 'DENY', null, provenance, reason, NO_LAYERS),
    }
  }
  const { stack, layers } = stackOf(snap, view, input.environment)
  const { mode, provenance } = resolveMode(snap.vocab, stack, verb)
  switch (mode) {
    case 'allow':
      return {
        kind: 'decided',
        outcome: outcomeOf(snap, input, verb, view, 'ALLOW', mode, provenance, 'policy_allow', layers),
      }
    case 'deny':
      return {
        kind: 'decided',
        outcome: outcomeOf(snap, input, verb, view, 'DENY', mode, provenance, 'policy_deny', layers),
      }
    case 'step_up':
      return {
        kind: 'decided',
        outcome: outcomeOf(snap, input, verb, view, 'STEP_UP', mode, provenance, 'step_up_required', layers),
      }
    case 'require_grant': {
      const otherwise = outcomeOf(snap, input, verb, view, 'DENY', mode, provenance, 'grant_required', layers)
      const matching = snap
        .grantsFor(verb)
        .filter((g) => grantMatches(g, view.principalId, input, nowSeconds))
      if (matching.length === 0) return { kind: 'decided', outcome: otherwise }
      const presented = matching.filter((g) => g.grantId === input.grantId)
      const candidates = [...presented, ...matching.filter((g) => g.grantId !== input.grantId)].map(
        (g): GrantCandidate => ({ grantId: g.grantId, expiresAt: g.expiresAt }),
      )
      return { kind: 'needs_grant', candidates, otherwise }
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

/**
 * The standing of a credential issued at `issuedAt` (an ALLOW token, a lease): barred as its
 * key is now, or barred for good when its key, its principal or the tenant was revoked or
 * disabled after its issue, even if reinstated since: contract §3, a token whose key or
 * principal was revoked after issue is `revoked`.
 */
export function standingSince(snap: CompiledSnapshot, keyId: string, issuedAt: number): Barred | null {
  const now = standingOf(snap, keyId)
  if (now) return now
  const key = snap.raw.keys[keyId] as { principalId: string }
  const lifted = snap.raw.roster.lifted
  if (lifted) {
    if (lifted.all !== null && lifted.all >= issuedAt)
      return { reason: 'sponsor_revoked_tenant', provenance: 'revocation' }
    if ((lifted.principals[key.principalId] ?? -1) >= issuedAt)
      return { reason: 'sponsor_revoked_principal', provenance: 'revocation' }
    if ((lifted.keys[keyId] ?? -1) >= issuedAt)
      return { reason: 'sponsor_revoked_key', provenance: 'revocation' }
  }
  const disabled = snap.raw.principals[key.principalId]?.barredThrough
  if (disabled != null && disabled >= issuedAt)
    return { reason: 'principal_disabled', provenance: 'principal_inactive' }
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

/**
 * Whether a verb is worth offering an agent (MCP's filtered `tools/list`): it may be attempted,
 * whatever the commit then decides: anything but a DENY, and a DENY that only lacks a grant
 * (the agent can ask a human for one). An unknown verb is not.
 */
export function mayAttempt(e: Evaluation): boolean {
  return (
    e.kind === 'needs_grant' ||
    (e.kind === 'decided' && (e.outcome.decision !== 'DENY' || e.outcome.mode === 'require_grant'))
  )
}
