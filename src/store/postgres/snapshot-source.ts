import type { KeyScope } from '../../core/identity.js'
import type { SnapshotGrant, TenantSnapshot } from '../../core/snapshot.js'
import type { Environment } from '../../core/verbs.js'
import type { SnapshotSource } from '../ports/decision-state.js'
import { snapshotFromRows } from '../snapshot-rows.js'
import type { Database } from './connect.js'
import { toLayer } from './policy-store.js'
import { createSystemStore } from './system-store.js'
import { createVerbStore } from './verb-store.js'

/**
 * Builds a tenant's snapshot from the system of record in one REPEATABLE READ
 * transaction, so every part is read as of one commit and matches the version read.
 */
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
        const revocations = await tx<
          { target_kind: string; target_id: string; revoked_at: number; lifted_at: number | null }[]
        >`
          select target_kind, target_id, revoked_at, lifted_at from revocations where tenant_id = ${tenantId}`
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
        const num = (n: number | null) => (n === null ? null : Number(n))
        return snapshotFromRows({
          tenantId,
          version: Number(tenant.version),
          nowSeconds,
          layers,
          verbs,
          systems,
          principals: principals.map((p) => ({
            id: p.id,
            name: p.name,
            disabled: p.disabled,
            deletedAt: num(p.deleted_at),
            disabledAt: num(p.disabled_at),
            enabledAt: num(p.enabled_at),
          })),
          keys: keys.map((k) => ({
            id: k.id,
            principalId: k.principal_id,
            revokedAt: num(k.revoked_at),
            scope: k.scope,
          })),
          revocations: revocations.map((r) => ({
            targetKind: r.target_kind,
            targetId: r.target_id,
            revokedAt: Number(r.revoked_at),
            liftedAt: num(r.lifted_at),
          })),
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
        })
      })) as TenantSnapshot | null
    },
    async versions() {
      const rows = await sql<{ id: string; version: number }[]>`select id, version from tenants`
      return rows.map((r) => ({ tenantId: r.id, version: Number(r.version) }))
    },
  }
}
