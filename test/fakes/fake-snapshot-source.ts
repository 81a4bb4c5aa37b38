import type { SnapshotSource, StoredLayer } from '../../src/store/ports/decision-state.js'
import { snapshotFromRows } from '../../src/store/snapshot-rows.js'
import type { FakeContext } from './fake-database.js'
import { createFakeSystemStore } from './fake-system-store.js'
import { createFakeVerbStore } from './fake-verb-store.js'

/**
 * Snapshots (store/postgres/snapshot-source.ts) over the fake tables. A read never yields between
 * its parts, so they agree with each other; unlike the real one's REPEATABLE READ transaction, it
 * also sees what an open transaction has written (see fake-database.ts).
 */
export function createFakeSnapshotSource(db: FakeContext['db']): SnapshotSource {
  const ctx: FakeContext = { db, tx: null }
  const verbs = createFakeVerbStore(ctx)
  const systems = createFakeSystemStore(ctx)
  return {
    async read(tenantId, nowSeconds) {
      const tenant = db.tenants.get(tenantId)
      if (!tenant) return null
      // Every part is read before the first await (a fake store's method body runs to its end when
      // called), so nothing can change between the parts.
      const verbList = verbs.list(tenantId)
      const systemList = systems.list(tenantId)
      const ofTenant = <T extends { tenantId: string }>(rows: T[]) =>
        rows.filter((r) => r.tenantId === tenantId)
      const rows = {
        tenantId,
        version: tenant.version,
        nowSeconds,
        layers: ofTenant(db.policyLayers.rows()).map(
          (l): StoredLayer => ({
            scope: l.scope,
            scopeKey: l.scopeKey,
            policy: l.policy,
            version: l.version,
            updatedAt: l.updatedAt,
          }),
        ),
        principals: ofTenant(db.principals.rows()),
        keys: ofTenant(db.apiKeys.rows()),
        revocations: ofTenant(db.revocations.rows()),
        grants: ofTenant(db.grants.rows())
          .filter((g) => g.consumedAt === null && g.expiresAt > nowSeconds)
          .map((g) => ({
            grantId: g.id,
            verb: g.verb,
            target: g.target,
            principalId: g.principalId,
            environment: g.environment,
            expiresAt: g.expiresAt,
          })),
      }
      return snapshotFromRows({ ...rows, verbs: await verbList, systems: await systemList })
    },
    async versions() {
      return db.tenants.rows().map((t) => ({ tenantId: t.id, version: t.version }))
    },
  }
}
