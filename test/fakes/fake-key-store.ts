import type { ApiKey } from '../../src/core/identity.js'
import type { KeyStore } from '../../src/store/ports/identity.js'
import { type ApiKeyRow, ConstraintViolation, type FakeContext } from './fake-database.js'

const toKey = (r: ApiKeyRow): ApiKey => ({
  id: r.id,
  tenantId: r.tenantId,
  principalId: r.principalId,
  scope: r.scope,
  createdAt: r.createdAt,
  revokedAt: r.revokedAt,
})

/** Text order under `collate "C"` (the embedded database's default) for the ASCII ids the service issues. */
const byText = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0)

/** In-memory KeyStore (table api_keys, joined with principals), mirroring src/store/postgres/key-store.ts. */
export function createFakeKeyStore(ctx: FakeContext): KeyStore {
  const { db } = ctx

  const find = (tenantId: string, id: string): ApiKeyRow | undefined => {
    const r = db.apiKeys.get(id)
    return r && r.tenantId === tenantId ? r : undefined
  }

  return {
    async create(k) {
      if (db.apiKeys.has(k.id)) throw new ConstraintViolation('api_keys_pkey')
      if (db.apiKeys.rows().some((r) => r.secretHash === k.secretHash)) {
        throw new ConstraintViolation('api_keys_secret_hash_key')
      }
      if (k.scope !== 'admin' && k.scope !== 'agent') throw new ConstraintViolation('api_keys_scope_check')
      if (!db.tenants.has(k.tenantId)) throw new ConstraintViolation('api_keys_tenant_id_fkey')
      if (!db.principals.has(k.principalId)) throw new ConstraintViolation('api_keys_principal_id_fkey')
      db.apiKeys.set(ctx.tx, k.id, {
        id: k.id,
        tenantId: k.tenantId,
        principalId: k.principalId,
        secretHash: k.secretHash,
        scope: k.scope,
        email: k.email,
        createdAt: k.createdAt,
        revokedAt: null,
        revokeReason: null,
      })
    },
    async resolve(secretHash) {
      const k = db.apiKeys.rows().find((r) => r.secretHash === secretHash)
      // The join is on the principal's id alone; the principal's tenant is reported as the key's.
      const p = k && db.principals.get(k.principalId)
      if (!k || !p) return null
      return {
        secretHash: k.secretHash,
        key: toKey(k),
        principal: {
          id: k.principalId,
          tenantId: k.tenantId,
          name: p.name,
          disabled: p.disabled,
          createdAt: p.createdAt,
          deletedAt: p.deletedAt,
        },
      }
    },
    async get(tenantId, id) {
      const r = find(tenantId, id)
      return r ? toKey(r) : null
    },
    async liveKeysOfPrincipal(tenantId, principalId) {
      return db.apiKeys
        .rows()
        .filter((r) => r.tenantId === tenantId && r.principalId === principalId && r.revokedAt === null)
        .sort((a, b) => a.createdAt - b.createdAt || byText(a.id, b.id))
        .map(toKey)
    },
    async indexEntries(tenantId) {
      // No ORDER BY in the SQL: insertion order here.
      return db.apiKeys
        .rows()
        .filter((r) => tenantId === undefined || r.tenantId === tenantId)
        .map((r) => ({ secretHash: r.secretHash, tenantId: r.tenantId, keyId: r.id }))
    },
    async revoke(tenantId, keyIds, at, reason) {
      if (keyIds.length === 0) return []
      const revoked = new Set<string>()
      for (const id of new Set(keyIds)) {
        const r = find(tenantId, id)
        if (!r || r.revokedAt !== null) continue
        db.apiKeys.set(ctx.tx, id, { ...r, revokedAt: at, revokeReason: reason })
        revoked.add(id)
      }
      // As the SQL adapter: in the order asked, a repeated id repeated.
      return keyIds.filter((id) => revoked.has(id))
    },
  }
}
