import type { Tenant } from '../../src/core/identity.js'
import type { TenantStore } from '../../src/store/ports/identity.js'
import { ConstraintViolation, type FakeContext, type TenantRow } from './fake-database.js'

const toTenant = (r: TenantRow): Tenant => ({
  id: r.id,
  name: r.name,
  createdAt: r.createdAt,
  version: r.version,
})

/** In-memory TenantStore (tables tenants, tenant_emails), mirroring src/store/postgres/tenant-store.ts. */
export function createFakeTenantStore(ctx: FakeContext): TenantStore {
  const { db } = ctx

  const bySponsorHash = (hash: string): TenantRow | undefined =>
    db.tenants.rows().find((r) => r.sponsorHash === hash)

  return {
    async create(t) {
      if (db.tenants.has(t.id)) throw new ConstraintViolation('tenants_pkey')
      if (bySponsorHash(t.sponsorHash)) throw new ConstraintViolation('tenants_sponsor_hash_key')
      db.tenants.set(ctx.tx, t.id, {
        id: t.id,
        name: t.name,
        createdAt: t.createdAt,
        sponsorHash: t.sponsorHash,
        version: 0,
        verbRegistryVersion: 0,
      })
    },
    async get(id) {
      const r = db.tenants.get(id)
      return r ? toTenant(r) : null
    },
    async findBySponsorHash(hash) {
      const r = bySponsorHash(hash)
      return r ? { tenant: toTenant(r), sponsorHash: r.sponsorHash } : null
    },
    async replaceSponsorHash(tenantId, from, to) {
      const r = db.tenants.get(tenantId)
      if (!r || r.sponsorHash !== from) return false
      const holder = bySponsorHash(to)
      if (holder && holder.id !== tenantId) throw new ConstraintViolation('tenants_sponsor_hash_key')
      db.tenants.set(ctx.tx, tenantId, { ...r, sponsorHash: to })
      return true
    },
    async claimEmail(email, tenantId, at) {
      // ON CONFLICT DO NOTHING skips the row before its foreign key is checked.
      if (db.tenantEmails.has(email)) return false
      if (!db.tenants.has(tenantId)) throw new ConstraintViolation('tenant_emails_tenant_id_fkey')
      db.tenantEmails.set(ctx.tx, email, { email, tenantId, createdAt: at })
      return true
    },
    async tenantOfEmail(email) {
      return db.tenantEmails.get(email)?.tenantId ?? null
    },
    async bumpVersion(tenantId) {
      // The tenant row lock serialises decision-affecting changes of one tenant (see the port).
      await db.locks.acquire(ctx.tx, `tenants:${tenantId}`)
      const r = db.tenants.get(tenantId)
      if (!r) throw new Error(`bumpVersion: no tenant ${tenantId}`)
      const version = r.version + 1
      db.tenants.set(ctx.tx, tenantId, { ...r, version })
      return version
    },
  }
}
