import type { ApiKey, KeyScope } from '../../core/identity.js'
import type { KeyStore } from '../ports/identity.js'
import { numOrNull, type SqlHandle } from './sql-handle.js'

interface KeyRow {
  id: string
  tenant_id: string
  principal_id: string
  scope: KeyScope
  created_at: number
  revoked_at: number | null
}

const toKey = (r: KeyRow): ApiKey => ({
  id: r.id,
  tenantId: r.tenant_id,
  principalId: r.principal_id,
  scope: r.scope,
  createdAt: Number(r.created_at),
  revokedAt: numOrNull(r.revoked_at),
})

export function createKeyStore(sql: SqlHandle): KeyStore {
  return {
    async create(k) {
      await sql`insert into api_keys (id, tenant_id, principal_id, secret_hash, scope, email, created_at)
                values (${k.id}, ${k.tenantId}, ${k.principalId}, ${k.secretHash}, ${k.scope}, ${k.email}, ${k.createdAt})`
    },
    async resolve(secretHash) {
      const [r] = await sql<
        (KeyRow & {
          secret_hash: string
          p_name: string
          p_disabled: boolean
          p_created_at: number
          p_deleted_at: number | null
        })[]
      >`
        select k.id, k.tenant_id, k.principal_id, k.scope, k.created_at, k.revoked_at,
               p.name as p_name, k.secret_hash, p.disabled as p_disabled, p.created_at as p_created_at, p.deleted_at as p_deleted_at
        from api_keys k join principals p on p.id = k.principal_id
        where k.secret_hash = ${secretHash}`
      if (!r) return null
      return {
        secretHash: r.secret_hash,
        key: toKey(r),
        principal: {
          id: r.principal_id,
          tenantId: r.tenant_id,
          name: r.p_name,
          disabled: r.p_disabled,
          createdAt: Number(r.p_created_at),
          deletedAt: numOrNull(r.p_deleted_at),
        },
      }
    },
    async get(tenantId, id) {
      const [r] = await sql<KeyRow[]>`select id, tenant_id, principal_id, scope, created_at, revoked_at
                                      from api_keys where tenant_id = ${tenantId} and id = ${id}`
      return r ? toKey(r) : null
    },
    async liveKeysOfPrincipal(tenantId, principalId) {
      const rows = await sql<KeyRow[]>`select id, tenant_id, principal_id, scope, created_at, revoked_at
                                       from api_keys
                                       where tenant_id = ${tenantId} and principal_id = ${principalId}
                                         and revoked_at is null
                                       order by created_at, id`
      return rows.map(toKey)
    },
    async indexEntries(tenantId) {
      const rows = await sql<{ secret_hash: string; tenant_id: string; id: string }[]>`
        select secret_hash, tenant_id, id from api_keys
        ${tenantId === undefined ? sql`` : sql`where tenant_id = ${tenantId}`}`
      return rows.map((r) => ({ secretHash: r.secret_hash, tenantId: r.tenant_id, keyId: r.id }))
    },
    async revoke(tenantId, keyIds, at, reason) {
      if (keyIds.length === 0) return []
      const rows = await sql<
        { id: string }[]
      >`update api_keys set revoked_at = ${at}, revoke_reason = ${reason}
                                               where tenant_id = ${tenantId} and id = any(${keyIds})
                                                 and revoked_at is null
                                               returning id`
      const revoked = new Set(rows.map((r) => r.id))
      return keyIds.filter((id) => revoked.has(id))
    },
  }
}
