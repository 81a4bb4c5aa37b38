import type { KeyScope } from '../core/identity.js'
import type { PolicyLayer } from '../core/policy-layers.js'
import type { SnapshotGrant, TenantSnapshot } from '../core/snapshot.js'
import type { CustomVerb, Environment } from '../core/verbs.js'
import type { SystemRecord } from '../systems/system-definition.js'
import type { StoredLayer } from './ports/decision-state.js'

/** What a tenant's snapshot is built from, as any storage reads it (one consistent read). */
export interface SnapshotRows {
  tenantId: string
  version: number
  nowSeconds: number
  layers: readonly StoredLayer[]
  verbs: CustomVerb[]
  systems: SystemRecord[]
  principals: readonly {
    id: string
    name: string
    disabled: boolean
    deletedAt: number | null
    disabledAt: number | null
    enabledAt: number | null
  }[]
  keys: readonly { id: string; principalId: string; revokedAt: number | null; scope: KeyScope }[]
  /** Every roster entry, lifted or not. */
  revocations: readonly { targetKind: string; targetId: string; revokedAt: number; liftedAt: number | null }[]
  /** Grants not consumed and not expired at `nowSeconds`. */
  grants: SnapshotGrant[]
}

/**
 * The last second whose credentials were outstanding at a revocation (or disable) made at `from`
 * and lifted at `to`. Credentials are issued in whole seconds: one issued in the second of the
 * revocation is barred, unless the lift came in that same second too, when it cannot be told
 * from one issued just after the lift (and is let be: nothing could be issued in between).
 */
function barredThrough(from: number, to: number): number {
  return from < to ? from : from - 1
}

/** The snapshot every decision under `version` is made from: a pure function of the rows. */
export function snapshotFromRows(rows: SnapshotRows): TenantSnapshot {
  const roster = rows.revocations.filter((r) => r.liftedAt === null)
  const lifted = rows.revocations.filter((r) => r.liftedAt !== null)
  const through = (r: (typeof lifted)[number]) => barredThrough(r.revokedAt, r.liftedAt as number)
  const liftedAll = lifted.find((r) => r.targetKind === 'all')
  const liftedOf = (kind: string) =>
    Object.fromEntries(lifted.filter((r) => r.targetKind === kind).map((r) => [r.targetId, through(r)]))
  const layer = (l: PolicyLayer): PolicyLayer => ({
    policy: l.policy,
    version: l.version,
    updatedAt: l.updatedAt,
  })
  const snapshot: TenantSnapshot = {
    tenantId: rows.tenantId,
    version: rows.version,
    builtAt: rows.nowSeconds,
    policies: { tenant: { policy: {}, version: 0, updatedAt: null }, environments: {}, principals: {} },
    verbs: rows.verbs,
    principals: Object.fromEntries(
      rows.principals.map((p) => [
        p.id,
        {
          name: p.name,
          disabled: p.disabled,
          deleted: p.deletedAt !== null,
          barredThrough:
            p.disabledAt === null || p.enabledAt === null ? null : barredThrough(p.disabledAt, p.enabledAt),
        },
      ]),
    ),
    keys: Object.fromEntries(
      rows.keys.map((k) => [
        k.id,
        { principalId: k.principalId, revoked: k.revokedAt !== null, scope: k.scope },
      ]),
    ),
    roster: {
      all: roster.some((r) => r.targetKind === 'all'),
      principals: roster.filter((r) => r.targetKind === 'principal').map((r) => r.targetId),
      keys: roster.filter((r) => r.targetKind === 'key').map((r) => r.targetId),
      lifted: {
        all: liftedAll ? through(liftedAll) : null,
        principals: liftedOf('principal'),
        keys: liftedOf('key'),
      },
    },
    grants: rows.grants,
    systems: rows.systems,
  }
  for (const l of rows.layers) {
    if (l.scope === 'tenant') snapshot.policies.tenant = layer(l)
    else if (l.scope === 'environment') snapshot.policies.environments[l.scopeKey as Environment] = layer(l)
    else snapshot.policies.principals[l.scopeKey] = layer(l)
  }
  return snapshot
}
