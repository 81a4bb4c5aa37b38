import type { InviteStore } from '../ports/identity.js'
import type { SqlHandle } from './sql-handle.js'

export function createInviteStore(sql: SqlHandle): InviteStore {
  return {
    async rotate(tenantId, codeHash, createdAt, expiresAt, issuerKeyId) {
      await sql`insert into invites (tenant_id, code_hash, created_at, expires_at, issuer_key_id)
                values (${tenantId}, ${codeHash}, ${createdAt}, ${expiresAt}, ${issuerKeyId})
                on conflict (tenant_id) do update
                  set code_hash = excluded.code_hash, created_at = excluded.created_at,
                      expires_at = excluded.expires_at, issuer_key_id = excluded.issuer_key_id`
    },
    async findByHash(codeHash) {
      const [r] = await sql<
        { tenant_id: string; created_at: number; expires_at: number; issuer_key_id: string | null }[]
      >`select tenant_id, created_at, expires_at, issuer_key_id from invites where code_hash = ${codeHash}`
      return r
        ? {
            tenantId: r.tenant_id,
            createdAt: Number(r.created_at),
            expiresAt: Number(r.expires_at),
            issuerKeyId: r.issuer_key_id,
          }
        : null
    },
  }
}
