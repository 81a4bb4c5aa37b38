import type { Tenant } from '../../core/identity.js'
import type { TenantStore } from '../ports/identity.js'
import type { SqlHandle } from './sql-handle.js'

interface TenantRow {
  id: string
  name: string
  created_at: number
  version: number
}

const toTenant = (r: TenantRow): Tenant => ({
  id: r.id,
  name: r.name,
  createdAt: r.created_at,
  version: r.version,
})

export function createTenantStore(sql: SqlHandle): TenantStore {
  return {
    async create(t) {
      await sql`insert into tenants (id, name, created_at, sponsor_hash)
                values (${t.id}, ${t.name}, ${t.createdAt}, ${t.sponsorHash})`
    },
    async get(id) {
      const [r] = await sql<TenantRow[]>`select id, name, created_at, version from tenants where id = ${id}`
      return r ? toTenant(r) : null
    },
    async findBySponsorHash(hash) {
      const [r] = await sql<(TenantRow & { sponsor_hash: string })[]>`
        select id, name, created_at, version, sponsor_hash from tenants where sponsor_hash = ${hash}`
      return r ? { tenant: toTenant(r), sponsorHash: r.sponsor_hash } : null
    },
    async replaceSponsorHash(tenantId, from, to) {
      // Under READ COMMITTED a second rotation waits for the first's row lock, then finds the
      // hash moved on: exactly one of two racing rotations replaces it.
      const rows = await sql`update tenants set sponsor_hash = ${to}
                             where id = ${tenantId} and sponsor_hash = ${from} returning id`
      return rows.length === 1
    },
    async claimEmail(email, tenantId, at) {
      const rows = await sql`insert into tenant_emails (email, tenant_id, created_at)
                             values (${email}, ${tenantId}, ${at})
                             on conflict (email) do nothing returning email`
      return rows.length === 1
    },
    async tenantOfEmail(email) {
      const [r] = await sql<
        { tenant_id: string }[]
      >`select tenant_id from tenant_emails where email = ${email}`
      return r?.tenant_id ?? null
    },
    async bumpVersion(tenantId) {
      const [r] = await sql<{ version: number }[]>`update tenants set version = version + 1
                                                  where id = ${tenantId} returning version`
      if (!r) throw new Error(`bumpVersion: no tenant ${tenantId}`)
      return r.version
    },
  }
}
