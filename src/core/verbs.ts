/** The verb vocabulary: built-ins with their default modes, custom verbs and deprecated aliases. */

export const MODES = ['allow', 'deny', 'require_grant', 'step_up'] as const
export type Mode = (typeof MODES)[number]

export const ENVIRONMENTS = ['dev', 'staging', 'prod'] as const
export type Environment = (typeof ENVIRONMENTS)[number]

/** Built-in verbs and their default modes (contract §3). */
export const BUILTIN_VERBS: Readonly<Record<string, Mode>> = Object.freeze({
  admit: 'step_up',
  prescribe: 'step_up',
  provision: 'require_grant',
  refund: 'step_up',
  verify: 'allow',
  verify_human: 'allow',
})

/** Exists only for the keyless sandbox; never part of a tenant's vocabulary. */
export const SANDBOX_VERB = 'demo_write'

/** A custom verb no layer sets resolves to this. */
export const CUSTOM_VERB_DEFAULT_MODE: Mode = 'deny'

export const MAX_CUSTOM_VERBS = 200

export interface CustomVerb {
  name: string
  description: string
  status: 'live' | 'deprecated'
  aliasOf: string | null
  createdAt: number
  deprecatedAt: number | null
}

export function isMode(s: string): s is Mode {
  return (MODES as readonly string[]).includes(s)
}

export function isEnvironment(s: string): s is Environment {
  return (ENVIRONMENTS as readonly string[]).includes(s)
}

export function isBuiltinName(name: string): boolean {
  const n = name.toLowerCase()
  return Object.hasOwn(BUILTIN_VERBS, n) || n === SANDBOX_VERB
}

/** `domain.action` style: lowercase segments of letters, digits and underscores, joined by dots; 1-64 chars. */
export function isValidCustomVerbName(name: string): boolean {
  return name.length >= 1 && name.length <= 64 && /^[a-z0-9_]+(\.[a-z0-9_]+)+$/.test(name)
}

export interface ResolvedVerb {
  /** The live verb decisions are made for. */
  canonical: string
  /** What the caller asked for (a deprecated alias, possibly). */
  requested: string
  builtin: boolean
}

/** The tenant's vocabulary, indexed for O(1) resolution. */
export class Vocabulary {
  private readonly custom: Map<string, CustomVerb>

  constructor(customVerbs: readonly CustomVerb[]) {
    this.custom = new Map(customVerbs.map((v) => [v.name, v]))
  }

  /** Every verb a policy can name: built-ins, then live custom verbs in name order. */
  liveVerbs(): string[] {
    const live = [...this.custom.values()].filter((v) => v.status === 'live').map((v) => v.name)
    return [...Object.keys(BUILTIN_VERBS), ...live.sort()]
  }

  liveCustomVerbs(): string[] {
    return [...this.custom.values()]
      .filter((v) => v.status === 'live')
      .map((v) => v.name)
      .sort()
  }

  customVerb(name: string): CustomVerb | undefined {
    return this.custom.get(name.toLowerCase())
  }

  customVerbs(): CustomVerb[] {
    return [...this.custom.values()]
  }

  defaultMode(canonical: string): Mode {
    return BUILTIN_VERBS[canonical] ?? CUSTOM_VERB_DEFAULT_MODE
  }

  isLive(name: string): boolean {
    const n = name.toLowerCase()
    return Object.hasOwn(BUILTIN_VERBS, n) || this.custom.get(n)?.status === 'live'
  }

  isDeprecated(name: string): boolean {
    return this.custom.get(name.toLowerCase())?.status === 'deprecated'
  }

  /**
   * Resolves a name (case-insensitive) to its live verb, following alias chains.
   * Null for an unknown name, or a deprecated one whose chain ends nowhere live.
   */
  resolve(requested: string): ResolvedVerb | null {
    let name = requested.toLowerCase()
    if (Object.hasOwn(BUILTIN_VERBS, name)) return { canonical: name, requested, builtin: true }
    for (let hops = 0; hops <= this.custom.size; hops++) {
      const v = this.custom.get(name)
      if (!v) return null
      if (v.status === 'live') return { canonical: v.name, requested, builtin: false }
      if (!v.aliasOf) return null
      name = v.aliasOf
    }
    return null // an alias cycle: never resolve rather than loop
  }
}
