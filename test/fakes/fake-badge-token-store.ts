import type { BadgeTokenStore } from '../../src/store/ports/badge-tokens.js'
import { type BadgeTokenRow, ConstraintViolation, type FakeContext } from './fake-database.js'

/** In-memory BadgeTokenStore (table badge_tokens), mirroring src/store/postgres/badge-token-store.ts. */
export function createFakeBadgeTokenStore(ctx: FakeContext): BadgeTokenStore {
  const { db } = ctx

  const live = (tokenHash: string): BadgeTokenRow | undefined =>
    db.badgeTokens.rows().find((r) => r.tokenHash === tokenHash && r.revokedAt === null)

  return {
    async create(t) {
      if (db.badgeTokens.has(t.id)) throw new ConstraintViolation('badge_tokens_pkey')
      // Unique whether revoked or not.
      if (db.badgeTokens.rows().some((r) => r.tokenHash === t.tokenHash)) {
        throw new ConstraintViolation('badge_tokens_token_hash_key')
      }
      if (!db.tenants.has(t.tenantId)) throw new ConstraintViolation('badge_tokens_tenant_id_fkey')
      db.badgeTokens.set(ctx.tx, t.id, {
        id: t.id,
        tenantId: t.tenantId,
        tokenHash: t.tokenHash,
        label: t.label,
        createdAt: t.createdAt,
        revokedAt: null,
      })
    },
    async findLive(tokenHash) {
      const r = live(tokenHash)
      if (!r) return null
      return {
        id: r.id,
        tenantId: r.tenantId,
        tokenHash: r.tokenHash,
        label: r.label,
        createdAt: r.createdAt,
        revokedAt: null,
      }
    },
    async revoke(tenantId, tokenHash, at) {
      const r = live(tokenHash)
      if (!r || r.tenantId !== tenantId) return false
      db.badgeTokens.set(ctx.tx, r.id, { ...r, revokedAt: at })
      return true
    },
  }
}
