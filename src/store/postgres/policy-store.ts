import type { PolicyScope } from '../../core/policy-layers.js'
import type { Mode } from '../../core/verbs.js'
import type { PolicyStore, StoredLayer } from '../ports/decision-state.js'
import type { SqlHandle } from './sql-handle.js'

interface LayerRow {
  scope: PolicyScope
  scope_key: string
  policy: Record<string, Mode>
  version: number
  updated_at: number
}

export const toLayer = (r: LayerRow): StoredLayer => ({
  scope: r.scope,
  scopeKey: r.scope_key,
  policy: r.policy,
  version: Number(r.version),
  updatedAt: Number(r.updated_at),
})

export function createPolicyStore(sql: SqlHandle): PolicyStore {
  return {
    async get(tenantId, scope, scopeKey) {
      const [r] = await sql<
        LayerRow[]
      >`select scope, scope_key, policy, version, updated_at from policy_layers
                                        where tenant_id = ${tenantId} and scope = ${scope} and scope_key = ${scopeKey}`
      return r ? toLayer(r) : null
    },
    async getForUpdate(tenantId, scope, scopeKey) {
      const [r] = await sql<
        LayerRow[]
      >`select scope, scope_key, policy, version, updated_at from policy_layers
                                        where tenant_id = ${tenantId} and scope = ${scope} and scope_key = ${scopeKey}
                                        for update`
      return r ? toLayer(r) : null
    },
    async list(tenantId) {
      const rows = await sql<
        LayerRow[]
      >`select scope, scope_key, policy, version, updated_at from policy_layers
                                         where tenant_id = ${tenantId}`
      return rows.map(toLayer)
    },
    async write(tenantId, scope, scopeKey, policy, at) {
      const [r] = await sql<LayerRow[]>`
        insert into policy_layers (tenant_id, scope, scope_key, policy, version, updated_at)
        values (${tenantId}, ${scope}, ${scopeKey}, ${sql.json(policy as Record<string, string>)}, 1, ${at})
        on conflict (tenant_id, scope, scope_key) do update
          set policy = excluded.policy, version = policy_layers.version + 1, updated_at = excluded.updated_at
        returning scope, scope_key, policy, version, updated_at`
      return toLayer(r as LayerRow)
    },
  }
}
