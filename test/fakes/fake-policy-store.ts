import type { PolicyScope } from '../../src/core/policy-layers.js'
import type { PolicyStore, StoredLayer } from '../../src/store/ports/decision-state.js'
import { ConstraintViolation, type FakeContext, key, type PolicyLayerRow } from './fake-database.js'

const SCOPES: readonly PolicyScope[] = ['tenant', 'environment', 'principal']

/** jsonb sorts object keys: shorter (in UTF-8 bytes) first, then bytewise. */
function jsonbKeyOrder(a: string, b: string): number {
  const x = Buffer.from(a)
  const y = Buffer.from(b)
  return x.length - y.length || Buffer.compare(x, y)
}

function jsonbText(v: unknown): string {
  if (typeof v === 'string') {
    // Where Postgres refuses the insert: \u0000 (22P05) and an unpaired surrogate (22P02).
    if (v.includes('\u0000'))
      throw Object.assign(new Error('unsupported Unicode escape sequence'), { code: '22P05' })
    if (/\p{Cs}/u.test(v))
      throw Object.assign(new Error('invalid input syntax for type json'), { code: '22P02' })
    return JSON.stringify(v)
  }
  if (Array.isArray(v)) return `[${v.map(jsonbText).join(',')}]`
  if (v !== null && typeof v === 'object') {
    const o = v as Record<string, unknown>
    return `{${Object.keys(o)
      .sort(jsonbKeyOrder)
      .map((k) => `${jsonbText(k)}:${jsonbText(o[k])}`)
      .join(',')}}`
  }
  return JSON.stringify(v)
}

/**
 * A value as a jsonb column gives it back through the driver: sent as JSON.stringify (undefined
 * members dropped, NaN → null, toJSON applied), stored with jsonb's key order, read by JSON.parse.
 * (Shared with the action and system fakes; it would sit better in fake-database.ts.)
 */
export function jsonb<T>(value: T): T {
  return JSON.parse(jsonbText(JSON.parse(JSON.stringify(value)))) as T
}

/**
 * A ConstraintViolation as Postgres reports it: its SQLSTATE (23505 unique, 23503 foreign key,
 * 23514 check) and constraint_name, which `isUniqueViolation` reads. (Shared with the other
 * decision-state fakes; it would sit better in fake-database.ts.)
 */
export function violation(
  constraint: string,
  code: '23505' | '23503' | '23514' = '23505',
): ConstraintViolation {
  return Object.assign(new ConstraintViolation(constraint), { code, constraint_name: constraint })
}

const toLayer = (r: PolicyLayerRow): StoredLayer => ({
  scope: r.scope,
  scopeKey: r.scopeKey,
  policy: r.policy,
  version: r.version,
  updatedAt: r.updatedAt,
})

const lockOf = (tenantId: string, scope: PolicyScope, scopeKey: string): string =>
  `policy_layers:${key(tenantId, scope, scopeKey)}`

/** In-memory PolicyStore (table policy_layers), mirroring src/store/postgres/policy-store.ts. */
export function createFakePolicyStore(ctx: FakeContext): PolicyStore {
  const { db } = ctx

  const get = (tenantId: string, scope: PolicyScope, scopeKey: string): StoredLayer | null => {
    const r = db.policyLayers.get(key(tenantId, scope, scopeKey))
    return r ? toLayer(r) : null
  }

  return {
    async get(tenantId, scope, scopeKey) {
      return get(tenantId, scope, scopeKey)
    },
    async getForUpdate(tenantId, scope, scopeKey) {
      // `for update` locks the row it finds: an absent layer has no row, so nothing is locked
      // and no other transaction waits (the tenant row lock is what serialises first writes).
      if (!db.policyLayers.has(key(tenantId, scope, scopeKey))) return null
      await db.locks.acquire(ctx.tx, lockOf(tenantId, scope, scopeKey))
      return get(tenantId, scope, scopeKey)
    },
    async list(tenantId) {
      // No ORDER BY in the SQL: insertion order here (see `write`).
      return db.policyLayers
        .rows()
        .filter((r) => r.tenantId === tenantId)
        .map(toLayer)
    },
    async write(tenantId, scope, scopeKey, policy, at) {
      const stored = jsonb(policy) // bound before any constraint is checked
      if (!SCOPES.includes(scope)) throw violation('policy_layers_scope_check', '23514')
      const k = key(tenantId, scope, scopeKey)
      // The upsert locks the row it writes, to the end of the transaction: it waits for a
      // transaction holding the layer (getForUpdate, or a write of its own) as Postgres does.
      await db.locks.acquire(ctx.tx, lockOf(tenantId, scope, scopeKey))
      const before = db.policyLayers.get(k)
      if (!before && !db.tenants.has(tenantId)) throw violation('policy_layers_tenant_id_fkey', '23503')
      const row: PolicyLayerRow = {
        tenantId,
        scope,
        scopeKey,
        policy: stored,
        version: before ? before.version + 1 : 1,
        updatedAt: at,
      }
      // Replaced in place: the update is HOT (no indexed column changes), and the bitmap scan
      // `list` gets follows the index to the row's first line pointer, so it keeps its place.
      db.policyLayers.set(ctx.tx, k, row)
      return toLayer(row)
    },
  }
}
