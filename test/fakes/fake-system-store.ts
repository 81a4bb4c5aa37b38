import type { StoredSystem, SystemStore } from '../../src/store/ports/systems.js'
import type { SystemDefinition, SystemRecord } from '../../src/systems/system-definition.js'
import { type FakeContext, key, type SystemRow } from './fake-database.js'
import { jsonb, violation } from './fake-policy-store.js'

/** Text order of the test databases' collation (C.UTF-8 on Postgres, C on PGlite): UTF-8 bytes. */
const byText = (a: string, b: string): number => Buffer.compare(Buffer.from(a), Buffer.from(b))

const toRecord = (r: SystemRow): StoredSystem => ({
  ...r.definition,
  // Rows written before systems had a kind are HTTP systems.
  kind: r.definition.kind ?? 'http',
  systemId: r.systemId,
  tenantId: r.tenantId,
  version: r.version,
  createdAt: r.createdAt,
  updatedAt: r.updatedAt,
  deletedAt: r.deletedAt,
})

const live = ({ deletedAt: _, ...rest }: StoredSystem): SystemRecord => rest

/** The stored definition, as jsonb gives it back: everything but the id, which is the row's key. */
function definitionOf(d: SystemDefinition): SystemRow['definition'] {
  const { systemId: _, ...rest } = d
  return jsonb(rest) as SystemRow['definition']
}

/** In-memory SystemStore (table systems), mirroring src/store/postgres/system-store.ts. */
export function createFakeSystemStore(ctx: FakeContext): SystemStore {
  const { db } = ctx

  const liveRows = (tenantId: string): SystemRow[] =>
    db.systems.rows().filter((r) => r.tenantId === tenantId && r.deletedAt === null)

  return {
    async list(tenantId) {
      return liveRows(tenantId)
        .sort((a, b) => byText(a.systemId, b.systemId))
        .map((r) => live(toRecord(r)))
    },
    async get(tenantId, systemId) {
      const r = db.systems.get(key(tenantId, systemId))
      return r ? toRecord(r) : null
    },
    async count(tenantId) {
      return liveRows(tenantId).length
    },
    async insert(tenantId, systemId, definition, at) {
      const stored = definitionOf(definition)
      const k = key(tenantId, systemId)
      // `on conflict do nothing`: a live system or a tombstone keeps the id taken.
      if (db.systems.has(k)) return null
      if (!db.tenants.has(tenantId)) throw violation('systems_tenant_id_fkey', '23503')
      const row: SystemRow = {
        tenantId,
        systemId,
        version: 1,
        definition: stored,
        createdAt: at,
        updatedAt: at,
        deletedAt: null,
      }
      db.systems.set(ctx.tx, k, row)
      return live(toRecord(row))
    },
    async replace(tenantId, systemId, definition, at) {
      const stored = definitionOf(definition)
      const k = key(tenantId, systemId)
      const r = db.systems.get(k)
      if (!r || r.deletedAt !== null) return null
      const row: SystemRow = { ...r, definition: stored, version: r.version + 1, updatedAt: at }
      db.systems.set(ctx.tx, k, row)
      return live(toRecord(row))
    },
    async remove(tenantId, systemId, at) {
      const k = key(tenantId, systemId)
      const r = db.systems.get(k)
      if (!r || r.deletedAt !== null) return false
      db.systems.set(ctx.tx, k, { ...r, deletedAt: at, updatedAt: at })
      return true
    },
  }
}
