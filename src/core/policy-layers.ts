import { type Environment, isMode, type Mode, type Vocabulary } from './verbs.js'

/** Policy layers, highest precedence first: principal override, environment override, tenant default. */
export type Layer = 'principal' | 'environment' | 'tenant'

/** A sparse map: only explicitly set verbs. */
export type PolicyMap = Readonly<Record<string, Mode>>

export interface PolicyLayer {
  policy: PolicyMap
  /** 0 when never configured; +1 per successful update of this layer. */
  version: number
  updatedAt: number | null
}

export const UNCONFIGURED: PolicyLayer = Object.freeze({
  policy: Object.freeze({}),
  version: 0,
  updatedAt: null,
})

export interface LayerStack {
  tenant: PolicyLayer
  environment?: PolicyLayer | undefined
  /** Leave out (or mark inert) for a disabled or deleted principal: an inert override never applies. */
  principal?: PolicyLayer | undefined
}

export interface Resolution {
  mode: Mode
  provenance: Layer
}

/** The winning mode of one (canonical) verb. Built-in defaults count as the tenant layer. */
export function resolveMode(vocab: Vocabulary, layers: LayerStack, verb: string): Resolution {
  const p = layers.principal?.policy[verb]
  if (p !== undefined) return { mode: p, provenance: 'principal' }
  const e = layers.environment?.policy[verb]
  if (e !== undefined) return { mode: e, provenance: 'environment' }
  const t = layers.tenant.policy[verb]
  if (t !== undefined) return { mode: t, provenance: 'tenant' }
  return { mode: vocab.defaultMode(verb), provenance: 'tenant' }
}

/** `effectivePolicy` and `policyProvenance` for every live verb. */
export function foldLayers(
  vocab: Vocabulary,
  layers: LayerStack,
): { effectivePolicy: Record<string, Mode>; policyProvenance: Record<string, Layer> } {
  const effectivePolicy: Record<string, Mode> = {}
  const policyProvenance: Record<string, Layer> = {}
  for (const verb of vocab.liveVerbs()) {
    const r = resolveMode(vocab, layers, verb)
    effectivePolicy[verb] = r.mode
    policyProvenance[verb] = r.provenance
  }
  return { effectivePolicy, policyProvenance }
}

export type PolicyScope = 'tenant' | 'environment' | 'principal'

export const INHERIT = 'inherit'

export type PolicyBodyProblem =
  | { code: 'empty_policy' }
  | { code: 'unknown_verb'; verbs: string[] }
  | { code: 'deprecated_verb'; verbs: string[] }
  | { code: 'unknown_mode'; verbs: string[]; modes: string[] }

/**
 * Checks a PUT body (verb → mode) against the vocabulary. Verb names are matched
 * case-insensitively and returned lowercase. `inherit` is valid only on the principal layer.
 */
export function checkPolicyBody(
  vocab: Vocabulary,
  body: Readonly<Record<string, unknown>>,
  scope: PolicyScope,
): { ok: true; entries: [string, Mode | typeof INHERIT][] } | { ok: false; problem: PolicyBodyProblem } {
  const raw = Object.entries(body)
  if (raw.length === 0) return { ok: false, problem: { code: 'empty_policy' } }
  const deprecated: string[] = []
  const unknown: string[] = []
  const badModeVerbs: string[] = []
  const badModes: string[] = []
  const entries: [string, Mode | typeof INHERIT][] = []
  for (const [name, mode] of raw) {
    const verb = name.toLowerCase()
    if (vocab.isDeprecated(verb)) deprecated.push(verb)
    else if (!vocab.isLive(verb)) unknown.push(name)
    const modeOk = typeof mode === 'string' && (isMode(mode) || (mode === INHERIT && scope === 'principal'))
    if (!modeOk) {
      badModeVerbs.push(verb)
      badModes.push(typeof mode === 'string' ? mode : JSON.stringify(mode))
    } else entries.push([verb, mode as Mode | typeof INHERIT])
  }
  if (deprecated.length > 0) return { ok: false, problem: { code: 'deprecated_verb', verbs: deprecated } }
  if (unknown.length > 0) return { ok: false, problem: { code: 'unknown_verb', verbs: unknown } }
  if (badModeVerbs.length > 0)
    return { ok: false, problem: { code: 'unknown_mode', verbs: badModeVerbs, modes: badModes } }
  return { ok: true, entries }
}

/** A PUT merges into the stored layer: each sent verb is set, or removed when sent as `inherit`. */
export function mergePolicy(
  current: PolicyMap,
  entries: readonly [string, Mode | typeof INHERIT][],
): Record<string, Mode> {
  const next: Record<string, Mode> = { ...current }
  for (const [verb, mode] of entries) {
    if (mode === INHERIT) delete next[verb]
    else next[verb] = mode
  }
  return next
}

/** Renames a verb inside a layer; returns null when the layer does not use the old name. */
export function renameVerbInPolicy(policy: PolicyMap, from: string, to: string): Record<string, Mode> | null {
  if (!Object.hasOwn(policy, from)) return null
  const next: Record<string, Mode> = {}
  for (const [verb, mode] of Object.entries(policy)) next[verb === from ? to : verb] = mode
  return next
}

export type { Environment }

/**
 * The stack for a principal's view: its override counts only while the principal is
 * live and enabled. A disabled or deleted principal's override is inert (kept, never applied).
 */
export function principalStack(
  tenant: PolicyLayer,
  environment: PolicyLayer | undefined,
  principal: PolicyLayer | undefined,
  inert: boolean,
): LayerStack {
  return { tenant, environment, principal: inert ? undefined : principal }
}
