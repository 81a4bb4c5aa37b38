import type { Environment } from '../../src/core/verbs.js'
import type { GrantStore } from '../../src/store/ports/decision-state.js'
import type { FakeContext, GrantRow } from './fake-database.js'
import { violation } from './fake-policy-store.js'

/** In-memory GrantStore (table grants), mirroring src/store/postgres/grant-store.ts. */
export function createFakeGrantStore(ctx: FakeContext): GrantStore {
  const { db } = ctx

  const find = (tenantId: string, id: string): GrantRow | undefined => {
    const r = db.grants.get(id)
    return r && r.tenantId === tenantId ? r : undefined
  }

  return {
    async insert(g) {
      // The primary key is the id alone: an id is taken across tenants.
      if (db.grants.has(g.grantId)) throw violation('grants_pkey')
      if (!db.tenants.has(g.tenantId)) throw violation('grants_tenant_id_fkey', '23503')
      db.grants.set(ctx.tx, g.grantId, {
        id: g.grantId,
        tenantId: g.tenantId,
        verb: g.verb,
        target: g.target ?? null,
        principalId: g.principalId ?? null,
        // A text column without a check: whatever string is given is stored.
        environment: (g.environment ?? null) as Environment | null,
        reason: g.reason ?? null,
        createdAt: g.createdAt,
        expiresAt: g.expiresAt,
        consumedAt: null,
        consumedBy: null,
      })
    },
    async markConsumed(tenantId, grantId, at, receiptId) {
      const r = find(tenantId, grantId)
      if (r && r.consumedAt === null)
        db.grants.set(ctx.tx, grantId, { ...r, consumedAt: at, consumedBy: receiptId })
    },
    async unmarkConsumed(tenantId, grantId, receiptId) {
      const r = find(tenantId, grantId)
      // `consumed_by = $receiptId` is never true of a null consumed_by.
      if (r && r.consumedBy !== null && r.consumedBy === receiptId) {
        db.grants.set(ctx.tx, grantId, { ...r, consumedAt: null, consumedBy: null })
      }
    },
    async renameVerb(tenantId, from, to) {
      let moved = 0
      for (const r of db.grants.rows()) {
        if (r.tenantId !== tenantId || r.verb !== from || r.consumedAt !== null) continue
        db.grants.set(ctx.tx, r.id, { ...r, verb: to })
        moved++
      }
      return moved
    },
  }
}
