import type { KeyScope } from '../../core/identity.js'
import type { PolicyLayer } from '../../core/policy-layers.js'
import type { SnapshotGrant, TenantSnapshot } from '../../core/snapshot.js'
import type { Environment } from '../../core/verbs.js'
import type { SnapshotSource } from '../ports/decision-state.js'
import type { Database } from './connect.js'
import { toLayer } from './policy-store.js'
import { createSystemStore } from './system-store.js'
import { createVerbStore } from './verb-store.js'

/**
 * Builds a tenant's snapshot from the system of record in one REPEATABLE READ
 * transaction, so every part is read as of one commit and matches the version read.
 */
/**
 * The last second whose credentials were outstanding at a revocation (or disable) made at `from`
 * and lifted at `to`. Credentials are issued in whole seconds: one issued in the second of the
 * revocation is barred, unless the lift came in that same second too, when it cannot be told
 * from one issued just after the lift (and is let be: nothing could be issued in between).
 */
function barredThrough(from: number, to: number): number {
  return from < to ? from : from - 1
}

export function createSnapshotSource(db: Database): SnapshotSource {
  const { sql } = db
  return {
    async read(tenantId, nowSeconds) {
      return (await sql.begin('isolation level repeatable read read only', async (tx) => {
        const [tenant] = await tx<{ version: number }[]>`select version from tenants where id = ${tenantId}`
        if (!tenant) return null
        const layers = (
          await tx`select scope, scope_key, policy, version, updated_at from policy_layers
                                 where tenant_id = ${tenantId}`
        ).map((r) => toLayer(r as never))
        const verbs = await createVerbStore(tx).list(tenantId)
        const systems = await createSystemStore(tx).list(tenantId)
        const principals = await tx<
          {
            id: string
            name: string
            disabled: boolean
            deleted_at: number | null
            disabled_at: number | null
            enabled_at: number | null
          }[]
        >`
          select id, name, disabled, deleted_at, disabled_at, enabled_at from principals
          where tenant_id = ${tenantId}`
        const keys = await tx<
          { id: string; principal_id: string; revoked_at: number | null; scope: KeyScope }[]
        >`
          select id, principal_id, revoked_at, scope from api_keys where tenant_id = ${tenantId}`
        const rows = await tx<
          { target_kind: string; target_id: string; revoked_at: number; lifted_at: number | null }[]
        >`
          select target_kind, target_id, revoked_at, lifted_at from revocations where tenant_id = ${tenantId}`
        const roster = rows.filter((r) => r.lifted_at === null)
        const lifted = rows.filter((r) => r.lifted_at !== null)
        const through = (r: (typeof lifted)[number]) =>
          barredThrough(Number(r.revoked_at), Number(r.lifted_at))
        const liftedAll = lifted.find((r) => r.target_kind === 'all')
        const liftedOf = (kind: string) =>
          Object.fromEntries(
            lifted.filter((r) => r.target_kind === kind).map((r) => [r.target_id, through(r)]),
          )
        const grants = await tx<
          {
            id: string
            verb: string
            target: string | null
            principal_id: string | null
            environment: Environment | null
            expires_at: number
          }[]
        >`
          select id, verb, target, principal_id, environment, expires_at from grants
          where tenant_id = ${tenantId} and consumed_at is null and expires_at > ${nowSeconds}`

        const layer = (l: PolicyLayer): PolicyLayer => ({
          policy: l.policy,
          version: l.version,
          updatedAt: l.updatedAt,
        })
        const snapshot: TenantSnapshot = {
          tenantId,
          version: Number(tenant.version),
          builtAt: nowSeconds,
          policies: { tenant: { policy: {}, version: 0, updatedAt: null }, environments: {}, principals: {} },
          verbs,
          principals: Object.fromEntries(
            principals.map((p) => [
              p.id,
              {
                name: p.name,
                disabled: p.disabled,
                deleted: p.deleted_at !== null,
                barredThrough:
                  p.disabled_at === null || p.enabled_at === null
                    ? null
                    : barredThrough(Number(p.disabled_at), Number(p.enabled_at)),
              },
            ]),
          ),
          keys: Object.fromEntries(
            keys.map((k) => [
              k.id,
              { principalId: k.principal_id, revoked: k.revoked_at !== null, scope: k.scope },
            ]),
          ),
          roster: {
            all: roster.some((r) => r.target_kind === 'all'),
            principals: roster.filter((r) => r.target_kind === 'principal').map((r) => r.target_id),
            keys: roster.filter((r) => r.target_kind === 'key').map((r) => r.target_id),
            lifted: {
              all: liftedAll ? through(liftedAll) : null,
              principals: liftedOf('principal'),
              keys: liftedOf('key'),
            },
          },
          grants: grants.map(
            (g): SnapshotGrant => ({
              grantId: g.id,
              verb: g.verb,
              target: g.target,
              principalId: g.principal_id,
              environment: g.environment,
              expiresAt: Number(g.expires_at),
            }),
          ),
          systems,
        }
        for (const l of layers) {
          if (l.scope === 'tenant') snapshot.policies.tenant = layer(l)
          else if (l.scope === 'environment')
            snapshot.policies.environments[l.scopeKey as Environment] = layer(l)
          else snapshot.policies.principals[l.scopeKey] = layer(l)
        }
        return snapshot
      })) as TenantSnapshot | null
    },
    async versions() {
      const rows = await sql<{ id: string; version: number }[]>`select id, version from tenants`
      return rows.map((r) => ({ tenantId: r.id, version: Number(r.version) }))
    },
  }
}
