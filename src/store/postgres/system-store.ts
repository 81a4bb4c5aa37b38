import type { SystemDefinition, SystemRecord } from '../../systems/system-definition.js'
import type { StoredSystem, SystemStore } from '../ports/systems.js'
import { numOrNull, type SqlHandle } from './sql-handle.js'

interface SystemRow {
  tenant_id: string
  system_id: string
  version: number
  definition: Omit<SystemDefinition, 'systemId'>
  created_at: number
  updated_at: number
  deleted_at: number | null
}

const toRecord = (r: SystemRow): StoredSystem => ({
  ...r.definition,
  // Rows written before systems had a kind are HTTP systems.
  kind: r.definition.kind ?? 'http',
  systemId: r.system_id,
  tenantId: r.tenant_id,
  version: Number(r.version),
  createdAt: Number(r.created_at),
  updatedAt: Number(r.updated_at),
  deletedAt: numOrNull(r.deleted_at),
})

const live = ({ deletedAt: _, ...rest }: StoredSystem): SystemRecord => rest

/** The stored definition: everything but the id, which is the row's key. */
function definitionOf(d: SystemDefinition): Omit<SystemDefinition, 'systemId'> {
  const { systemId: _, ...rest } = d
  return rest
}

export function createSystemStore(sql: SqlHandle): SystemStore {
  return {
    async list(tenantId) {
      const rows = await sql<SystemRow[]>`select * from systems
        where tenant_id = ${tenantId} and deleted_at is null order by system_id`
      return rows.map((r) => live(toRecord(r)))
    },
    async get(tenantId, systemId) {
      const [r] = await sql<SystemRow[]>`select * from systems
        where tenant_id = ${tenantId} and system_id = ${systemId}`
      return r ? toRecord(r) : null
    },
    async count(tenantId) {
      const [r] = await sql<{ n: number }[]>`select count(*)::int as n from systems
        where tenant_id = ${tenantId} and deleted_at is null`
      return r?.n ?? 0
    },
    async insert(tenantId, systemId, definition, at) {
      // `on conflict`, not a caught unique violation: that would abort the caller's transaction.
      const [r] = await sql<SystemRow[]>`insert into systems
        (tenant_id, system_id, version, definition, created_at, updated_at)
        values (${tenantId}, ${systemId}, 1, ${sql.json(definitionOf(definition) as never)}, ${at}, ${at})
        on conflict (tenant_id, system_id) do nothing
        returning *`
      return r ? live(toRecord(r)) : null
    },
    async replace(tenantId, systemId, definition, at) {
      const [r] = await sql<SystemRow[]>`update systems
        set definition = ${sql.json(definitionOf(definition) as never)}, version = version + 1, updated_at = ${at}
        where tenant_id = ${tenantId} and system_id = ${systemId} and deleted_at is null
        returning *`
      return r ? live(toRecord(r)) : null
    },
    async remove(tenantId, systemId, at) {
      const rows = await sql`update systems set deleted_at = ${at}, updated_at = ${at}
        where tenant_id = ${tenantId} and system_id = ${systemId} and deleted_at is null
        returning system_id`
      return rows.length === 1
    },
  }
}
