import type { CustomVerb } from '../../src/core/verbs.js'
import type { VerbStore } from '../../src/store/ports/decision-state.js'
import { type FakeContext, key, type VerbRow } from './fake-database.js'
import { violation } from './fake-policy-store.js'

const toVerb = (r: VerbRow): CustomVerb => ({
  name: r.name,
  description: r.description,
  status: r.status,
  aliasOf: r.aliasOf,
  createdAt: r.createdAt,
  deprecatedAt: r.deprecatedAt,
})

/**
 * In-memory VerbStore (table custom_verbs, and tenants.verb_registry_version), mirroring
 * src/store/postgres/verb-store.ts.
 */
export function createFakeVerbStore(ctx: FakeContext): VerbStore {
  const { db } = ctx

  const ofTenant = (tenantId: string): VerbRow[] => db.verbs.rows().filter((r) => r.tenantId === tenantId)

  return {
    async list(tenantId) {
      return ofTenant(tenantId)
        .sort((a, b) => a.createdOrder - b.createdOrder)
        .map(toVerb)
    },
    async get(tenantId, name) {
      // Only `get` lowercases the name, as the SQL adapter does (in JavaScript, before the query).
      const r = db.verbs.get(key(tenantId, name.toLowerCase()))
      return r ? toVerb(r) : null
    },
    async count(tenantId) {
      return ofTenant(tenantId).length
    },
    async insert(tenantId, v) {
      // The identity value is drawn before the constraints are checked, as Postgres does.
      const createdOrder = db.nextIdentity('custom_verbs')
      if (v.status !== 'live' && v.status !== 'deprecated') {
        throw violation('custom_verbs_status_check', '23514')
      }
      const k = key(tenantId, v.name)
      if (db.verbs.has(k)) throw violation('custom_verbs_pkey')
      if (!db.tenants.has(tenantId)) throw violation('custom_verbs_tenant_id_fkey', '23503')
      db.verbs.set(ctx.tx, k, {
        tenantId,
        name: v.name,
        description: v.description,
        status: v.status,
        aliasOf: v.aliasOf ?? null,
        createdAt: v.createdAt,
        deprecatedAt: v.deprecatedAt ?? null,
        createdOrder,
      })
    },
    async setDescription(tenantId, name, description) {
      const k = key(tenantId, name)
      const r = db.verbs.get(k)
      if (r) db.verbs.set(ctx.tx, k, { ...r, description })
    },
    async deprecate(tenantId, name, aliasOf, at) {
      const k = key(tenantId, name)
      const r = db.verbs.get(k)
      if (r) db.verbs.set(ctx.tx, k, { ...r, status: 'deprecated', aliasOf, deprecatedAt: at })
      // Flatten: every older alias of the renamed verb now points at the new live name (the
      // second statement, so it sees the first's change).
      for (const a of ofTenant(tenantId)) {
        if (a.aliasOf === name) db.verbs.set(ctx.tx, key(tenantId, a.name), { ...a, aliasOf })
      }
    },
    async registryVersion(tenantId) {
      return db.tenants.get(tenantId)?.verbRegistryVersion ?? 0
    },
    async advanceRegistry(tenantId, expected) {
      const t = db.tenants.get(tenantId)
      if (!t || t.verbRegistryVersion !== expected) return false
      db.tenants.set(ctx.tx, tenantId, { ...t, verbRegistryVersion: t.verbRegistryVersion + 1 })
      return true
    },
  }
}
