import type { Principal } from '../../src/core/identity.js'
import type { PrincipalStore } from '../../src/store/ports/identity.js'
import { ConstraintViolation, type FakeContext, type PrincipalRow } from './fake-database.js'

const toPrincipal = (r: PrincipalRow): Principal => ({
  id: r.id,
  tenantId: r.tenantId,
  name: r.name,
  disabled: r.disabled,
  createdAt: r.createdAt,
  deletedAt: r.deletedAt,
})

/**
 * Postgres `lower()` under a UTF-8 ctype: a simple, per-character mapping (so no final sigma,
 * and İ becomes i, not i + U+0307 as in JavaScript's full mapping).
 */
function lower(s: string): string {
  let out = ''
  for (const c of s) out += c === '\u0130' ? 'i' : c.toLowerCase()
  return out
}

/** In-memory PrincipalStore (table principals), mirroring src/store/postgres/principal-store.ts. */
export function createFakePrincipalStore(ctx: FakeContext): PrincipalStore {
  const { db } = ctx

  /** A live principal of the tenant holding the name (the principals_live_name index), other than `except`. */
  const liveHolder = (tenantId: string, name: string, except?: string): PrincipalRow | undefined => {
    const wanted = lower(name)
    return db.principals
      .rows()
      .find(
        (r) => r.tenantId === tenantId && r.deletedAt === null && r.id !== except && lower(r.name) === wanted,
      )
  }

  const liveKeyCount = (principalId: string): number =>
    db.apiKeys.rows().filter((k) => k.principalId === principalId && k.revokedAt === null).length

  const find = (tenantId: string, id: string): PrincipalRow | undefined => {
    const r = db.principals.get(id)
    return r && r.tenantId === tenantId ? r : undefined
  }

  return {
    async create(p) {
      // The identity value is drawn before the conflict check, as Postgres does (a clash leaves a gap).
      const createdOrder = db.nextIdentity('principals')
      if (liveHolder(p.tenantId, p.name)) return false
      if (db.principals.has(p.id)) throw new ConstraintViolation('principals_pkey')
      if (!db.tenants.has(p.tenantId)) throw new ConstraintViolation('principals_tenant_id_fkey')
      db.principals.set(ctx.tx, p.id, {
        id: p.id,
        tenantId: p.tenantId,
        name: p.name,
        disabled: p.disabled,
        createdAt: p.createdAt,
        deletedAt: null,
        disabledAt: null,
        enabledAt: null,
        createdOrder,
      })
      return true
    },
    async get(tenantId, id) {
      const r = find(tenantId, id)
      return r ? toPrincipal(r) : null
    },
    async getForUpdate(tenantId, id) {
      await db.locks.acquire(ctx.tx, `principals:${id}`)
      const r = find(tenantId, id)
      return r ? toPrincipal(r) : null
    },
    async findLiveByName(tenantId, name) {
      const r = liveHolder(tenantId, name)
      return r ? toPrincipal(r) : null
    },
    async list(tenantId, includeDeleted) {
      return db.principals
        .rows()
        .filter((r) => r.tenantId === tenantId && (includeDeleted || r.deletedAt === null))
        .sort((a, b) => a.createdOrder - b.createdOrder)
        .map((r) => ({ ...toPrincipal(r), keyCount: liveKeyCount(r.id) }))
    },
    async keyCount(principalId) {
      return liveKeyCount(principalId)
    },
    async rename(tenantId, id, name) {
      const r = find(tenantId, id)
      if (!r || liveHolder(tenantId, name, id)) return false
      db.principals.set(ctx.tx, id, { ...r, name })
      return true
    },
    async setDisabled(tenantId, id, disabled, at) {
      const r = find(tenantId, id)
      if (!r) return
      db.principals.set(ctx.tx, id, {
        ...r,
        disabled,
        disabledAt: disabled ? at : r.disabledAt,
        enabledAt: disabled ? r.enabledAt : at,
      })
    },
    async tombstone(tenantId, id, at) {
      const r = find(tenantId, id)
      if (!r) return
      db.principals.set(ctx.tx, id, { ...r, deletedAt: at })
    },
  }
}
