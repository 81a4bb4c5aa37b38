import type { Principal } from '../../core/identity.js'
import type { PrincipalStore } from '../ports/identity.js'
import { numOrNull, type SqlHandle } from './sql-handle.js'

interface PrincipalRow {
  id: string
  tenant_id: string
  name: string
  disabled: boolean
  created_at: number
  deleted_at: number | null
}

const toPrincipal = (r: PrincipalRow): Principal => ({
  id: r.id,
  tenantId: r.tenant_id,
  name: r.name,
  disabled: r.disabled,
  createdAt: Number(r.created_at),
  deletedAt: numOrNull(r.deleted_at),
})

export function createPrincipalStore(sql: SqlHandle): PrincipalStore {
  return {
    async create(p) {
      // ON CONFLICT (not a caught error) so a clash never aborts the caller's transaction.
      const rows = await sql`insert into principals (id, tenant_id, name, disabled, created_at)
                             values (${p.id}, ${p.tenantId}, ${p.name}, ${p.disabled}, ${p.createdAt})
                             on conflict (tenant_id, lower(name)) where deleted_at is null do nothing
                             returning id`
      return rows.length === 1
    },
    async get(tenantId, id) {
      const [r] = await sql<
        PrincipalRow[]
      >`select * from principals where tenant_id = ${tenantId} and id = ${id}`
      return r ? toPrincipal(r) : null
    },
    async getForUpdate(tenantId, id) {
      const [r] = await sql<PrincipalRow[]>`select * from principals
                                            where tenant_id = ${tenantId} and id = ${id} for update`
      return r ? toPrincipal(r) : null
    },
    async findLiveByName(tenantId, name) {
      const [r] = await sql<PrincipalRow[]>`select * from principals
                                            where tenant_id = ${tenantId} and lower(name) = lower(${name})
                                              and deleted_at is null`
      return r ? toPrincipal(r) : null
    },
    async list(tenantId, includeDeleted) {
      const rows = await sql<(PrincipalRow & { key_count: number })[]>`
        select p.*, (select count(*) from api_keys k
                     where k.principal_id = p.id and k.revoked_at is null)::int as key_count
        from principals p
        where p.tenant_id = ${tenantId} ${includeDeleted ? sql`` : sql`and p.deleted_at is null`}
        order by p.created_order`
      return rows.map((r) => ({ ...toPrincipal(r), keyCount: r.key_count }))
    },
    async keyCount(principalId) {
      const [r] = await sql<{ n: number }[]>`select count(*)::int as n from api_keys
                                             where principal_id = ${principalId} and revoked_at is null`
      return r?.n ?? 0
    },
    async rename(tenantId, id, name) {
      // Callers hold the tenant row lock (bumpVersion), so check-then-update cannot race;
      // the partial unique index stays as the backstop.
      const rows = await sql`update principals set name = ${name}
                             where tenant_id = ${tenantId} and id = ${id}
                               and not exists (select 1 from principals o
                                               where o.tenant_id = ${tenantId} and o.id <> ${id}
                                                 and o.deleted_at is null and lower(o.name) = lower(${name}))
                             returning id`
      return rows.length === 1
    },
    async setDisabled(tenantId, id, disabled, at) {
      await sql`update principals
                set disabled = ${disabled},
                    disabled_at = case when ${disabled} then ${at} else disabled_at end,
                    enabled_at = case when ${disabled} then enabled_at else ${at} end
                where tenant_id = ${tenantId} and id = ${id}`
    },
    async tombstone(tenantId, id, at) {
      await sql`update principals set deleted_at = ${at} where tenant_id = ${tenantId} and id = ${id}`
    },
  }
}
