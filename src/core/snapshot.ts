import type { Evaluation } from './evaluate.js'
import type { KeyScope } from './identity.js'
import type { PolicyLayer } from './policy-layers.js'
import { type CustomVerb, type Environment, Vocabulary } from './verbs.js'

export interface SnapshotPrincipal {
  name: string
  disabled: boolean
  deleted: boolean
}

export interface SnapshotKey {
  principalId: string
  revoked: boolean
  scope: KeyScope
}

export interface SnapshotGrant {
  grantId: string
  /** Canonical verb. */
  verb: string
  /** Null fields match anything. */
  target: string | null
  principalId: string | null
  environment: Environment | null
  expiresAt: number
}

export interface Roster {
  all: boolean
  principals: string[]
  keys: string[]
}

/**
 * Everything a decision depends on for one tenant, at one version. Plain JSON, so it
 * can sit in Redis; every change that affects decisions produces a new version.
 */
export interface TenantSnapshot {
  tenantId: string
  version: number
  builtAt: number
  policies: {
    tenant: PolicyLayer
    environments: Partial<Record<Environment, PolicyLayer>>
    principals: Record<string, PolicyLayer>
  }
  verbs: CustomVerb[]
  principals: Record<string, SnapshotPrincipal>
  keys: Record<string, SnapshotKey>
  roster: Roster
  /** Live, unconsumed grants at build time (consumption itself is checked atomically at commit). */
  grants: SnapshotGrant[]
}

/** Entries `settled` holds; past it the oldest is dropped. */
export const SETTLED_LIMIT = 4096

/**
 * A snapshot indexed for decisions: built once per version, then read-only, but for the
 * `settled` cache evaluate() keeps on it.
 */
export class CompiledSnapshot {
  readonly vocab: Vocabulary
  readonly rosterPrincipals: ReadonlySet<string>
  readonly rosterKeys: ReadonlySet<string>
  private readonly grantsByVerb: ReadonlyMap<string, readonly SnapshotGrant[]>
  /**
   * Evaluations that depend on nothing but this snapshot, the key, the verb and the
   * environment (every mode but require_grant), kept so a repeated request is not folded
   * again. Owned by evaluate(); bounded, since keys and verbs come from callers.
   */
  readonly settled = new Map<string, Evaluation>()

  constructor(readonly raw: TenantSnapshot) {
    this.vocab = new Vocabulary(raw.verbs)
    this.rosterPrincipals = new Set(raw.roster.principals)
    this.rosterKeys = new Set(raw.roster.keys)
    const byVerb = new Map<string, SnapshotGrant[]>()
    for (const g of [...raw.grants].sort(
      (a, b) => a.expiresAt - b.expiresAt || (a.grantId < b.grantId ? -1 : 1),
    )) {
      const list = byVerb.get(g.verb) ?? []
      list.push(g)
      byVerb.set(g.verb, list)
    }
    this.grantsByVerb = byVerb
  }

  get tenantId(): string {
    return this.raw.tenantId
  }

  get version(): number {
    return this.raw.version
  }

  grantsFor(verb: string): readonly SnapshotGrant[] {
    return this.grantsByVerb.get(verb) ?? []
  }
}
