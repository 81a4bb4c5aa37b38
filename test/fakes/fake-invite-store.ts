import type { InviteStore } from '../../src/store/ports/identity.js'
import { ConstraintViolation, type FakeContext } from './fake-database.js'

/** In-memory InviteStore (table invites, one row per tenant), mirroring src/store/postgres/invite-store.ts. */
export function createFakeInviteStore(ctx: FakeContext): InviteStore {
  const { db } = ctx
  return {
    async rotate(tenantId, codeHash, createdAt, expiresAt, issuerKeyId) {
      // code_hash is unique across tenants; the upsert only absorbs a clash on tenant_id.
      if (db.invites.rows().some((r) => r.codeHash === codeHash && r.tenantId !== tenantId)) {
        throw new ConstraintViolation('invites_code_hash_key')
      }
      if (!db.invites.has(tenantId) && !db.tenants.has(tenantId)) {
        throw new ConstraintViolation('invites_tenant_id_fkey')
      }
      db.invites.set(ctx.tx, tenantId, { tenantId, codeHash, createdAt, expiresAt, issuerKeyId })
    },
    async findByHash(codeHash) {
      const r = db.invites.rows().find((i) => i.codeHash === codeHash)
      return r
        ? { tenantId: r.tenantId, createdAt: r.createdAt, expiresAt: r.expiresAt, issuerKeyId: r.issuerKeyId }
        : null
    },
  }
}
