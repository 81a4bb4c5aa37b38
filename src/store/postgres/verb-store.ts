import type { CustomVerb } from '../../core/verbs.js'
import type { VerbStore } from '../ports/decision-state.js'
import { numOrNull, type SqlHandle } from './sql-handle.js'

interface VerbRow {
  name: string
  description: string
  status: 'live' | 'deprecated'
  alias_of: string | null
  created_at: number
  deprecated_at: number | null
}

const toVerb = (r: VerbRow): CustomVerb => ({
  name: r.name,
  description: r.description,
  status: r.status,
  aliasOf: r.alias_of,
  createdAt: Number(r.created_at),
  deprecatedAt: numOrNull(r.deprecated_at),
})

export function createVerbStore(sql: SqlHandle): VerbStore {
  return {
    async list(tenantId) {
      const rows = await sql<VerbRow[]>`select name, description, status, alias_of, created_at, deprecated_at
                                        from custom_verbs where tenant_id = ${tenantId} order by created_order`
      return rows.map(toVerb)
    },
    async get(tenantId, name) {
      const [r] = await sql<VerbRow[]>`select name, description, status, alias_of, created_at, deprecated_at
                                       from custom_verbs where tenant_id = ${tenantId} and name = ${name.toLowerCase()}`
      return r ? toVerb(r) : null
    },
    async count(tenantId) {
      const [r] = await sql<
        { n: number }[]
      >`select count(*)::int as n from custom_verbs where tenant_id = ${tenantId}`
      return r?.n ?? 0
    },
    async insert(tenantId, v) {
      await sql`insert into custom_verbs (tenant_id, name, description, status, alias_of, created_at, deprecated_at)
                values (${tenantId}, ${v.name}, ${v.description}, ${v.status}, ${v.aliasOf}, ${v.createdAt}, ${v.deprecatedAt})`
    },
    async setDescription(tenantId, name, description) {
      await sql`update custom_verbs set description = ${description} where tenant_id = ${tenantId} and name = ${name}`
    },
    async deprecate(tenantId, name, aliasOf, at) {
      await sql`update custom_verbs set status = 'deprecated', alias_of = ${aliasOf}, deprecated_at = ${at}
                where tenant_id = ${tenantId} and name = ${name}`
      // Flatten: every older alias of the renamed verb now points at the new live name.
      await sql`update custom_verbs set alias_of = ${aliasOf} where tenant_id = ${tenantId} and alias_of = ${name}`
    },
    async registryVersion(tenantId) {
      const [r] = await sql<
        { v: number }[]
      >`select verb_registry_version as v from tenants where id = ${tenantId}`
      return Number(r?.v ?? 0)
    },
    async advanceRegistry(tenantId, expected) {
      const rows = await sql`update tenants set verb_registry_version = verb_registry_version + 1
                             where id = ${tenantId} and verb_registry_version = ${expected} returning id`
      return rows.length === 1
    },
  }
}
