import type { BadgeTokenRecord, BadgeTokenStore } from '../ports/badge-tokens.js'
import type { SqlHandle } from './sql-handle.js'

interface Row {
  id: string
  tenant_id: string
  token_hash: string
  label: string
  created_at: number
  revoked_at: number | null
}

export function createBadgeTokenStore(sql: SqlHandle): BadgeTokenStore {
  return {
    async create(t) {
      await sql`insert into badge_tokens (id, tenant_id, token_hash, label, created_at)
                values (${t.id}, ${t.tenantId}, ${t.tokenHash}, ${t.label}, ${t.createdAt})`
    },
    async findLive(tokenHash) {
      const [r] = await sql<Row[]>`select * from badge_tokens
                                   where token_hash = ${tokenHash} and revoked_at is null`
      if (!r) return null
      const record: BadgeTokenRecord = {
        id: r.id,
        tenantId: r.tenant_id,
        tokenHash: r.token_hash,
        label: r.label,
        createdAt: Number(r.created_at),
        revokedAt: null,
      }
      return record
    },
    async revoke(tenantId, tokenHash, at) {
      const rows = await sql`update badge_tokens set revoked_at = ${at}
                             where tenant_id = ${tenantId} and token_hash = ${tokenHash} and revoked_at is null
                             returning id`
      return rows.length > 0
    },
  }
}
