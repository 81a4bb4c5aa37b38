import type { SystemRecord } from './enrolled-system.js'
import type { Evaluation, KeyView } from './evaluate.js'
import type { KeyScope } from './identity.js'
import { compilePathPattern, type PathPattern } from './path-pattern.js'
import type { PolicyLayer } from './policy-layers.js'
import { compileRoutes, type RouteMatcher } from './route-matcher.js'
import { type CustomVerb, type Environment, Vocabulary } from './verbs.js'

export interface SnapshotPrincipal {
  name: string
  disabled: boolean
  deleted: boolean
  /**
   * Enabled again after a disable: credentials issued up to this second (epoch seconds) were
   * outstanding while it was disabled, and stay revoked. Absent in earlier versions' snapshots.
   */
  barredThrough?: number | null
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
  /**
   * Revocations lifted since (reinstated): for each, the last second (epoch seconds) a credential
   * issued then was outstanding at the kill switch, and stays revoked (contract §3). Absent in
   * snapshots of earlier versions.
   */
  lifted?: { all: number | null; principals: Record<string, number>; keys: Record<string, number> }
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
  /** Enrolled systems, live ones only: which writes map to which verb is decision state too. */
  systems: SystemRecord[]
}

/** A system with its route table compiled, once per version of the system. */
export interface CompiledSystem {
  readonly record: SystemRecord
  readonly routes: RouteMatcher
  /** An MCP or GraphQL system's endpoint, whose request bodies are read and each call mapped. */
  readonly endpoint: PathPattern | null
}

/** A system's routes and endpoint, compiled. */
export function compileSystem(record: SystemRecord): CompiledSystem {
  const binding = record.kind === 'mcp' ? record.mcp : record.kind === 'graphql' ? record.graphql : undefined
  return {
    record,
    routes: compileRoutes(record.routes),
    endpoint: binding ? compilePathPattern(binding.endpoint) : null,
  }
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
  /** Per known key, what its every decision folds again (principal, standing, layer stacks). Owned by evaluate(). */
  readonly keyViews = new Map<string, KeyView>()
  private readonly systemsById: ReadonlyMap<string, CompiledSystem>
  private byHost: Map<string, CompiledSystem[]> | undefined

  /**
   * `previous` (the tenant's snapshot this one replaces) lends its compiled systems whose
   * version did not change: most changes are to policies, not routes.
   */
  constructor(
    readonly raw: TenantSnapshot,
    previous?: CompiledSnapshot,
  ) {
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
    const systems = new Map<string, CompiledSystem>()
    for (const record of raw.systems ?? []) {
      const before = previous?.system(record.systemId)
      systems.set(
        record.systemId,
        before && before.record.version === record.version && before.record.updatedAt === record.updatedAt
          ? before
          : compileSystem(record),
      )
    }
    this.systemsById = systems
  }

  /** The tenant's live system with this id; undefined for a missing one (another tenant's included). */
  system(systemId: string): CompiledSystem | undefined {
    return this.systemsById.get(systemId)
  }

  systems(): Iterable<CompiledSystem> {
    return this.systemsById.values()
  }

  /** The tenant's systems whose upstream is on this host (lower case), in systemId order. */
  systemsOnHost(hostname: string): readonly CompiledSystem[] {
    if (!this.byHost) {
      const byHost = new Map<string, CompiledSystem[]>()
      for (const s of [...this.systemsById.values()].sort((a, b) =>
        a.record.systemId < b.record.systemId ? -1 : 1,
      )) {
        const host = new URL(s.record.upstream).hostname.replace(/^\[|\]$/g, '').toLowerCase()
        const list = byHost.get(host) ?? []
        list.push(s)
        byHost.set(host, list)
      }
      this.byHost = byHost
    }
    return this.byHost.get(hostname) ?? []
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
