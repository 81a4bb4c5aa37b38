import type { SandboxGrantStore } from '../../src/store/ports/decision-state.js'
import type { FakeContext } from './fake-database.js'
import { violation } from './fake-policy-store.js'

/** In-memory SandboxGrantStore (table sandbox_grants), mirroring src/store/postgres/sandbox-grant-store.ts. */
export function createFakeSandboxGrantStore(ctx: FakeContext): SandboxGrantStore {
  const { db } = ctx
  return {
    async insert(g) {
      // No tenant: sandbox grants reference nothing.
      if (db.sandboxGrants.has(g.grantId)) throw violation('sandbox_grants_pkey')
      db.sandboxGrants.set(ctx.tx, g.grantId, {
        id: g.grantId,
        verb: g.verb,
        target: g.target,
        createdAt: g.createdAt,
        expiresAt: g.expiresAt,
      })
    },
    async pruneExpired(nowSeconds) {
      let pruned = 0
      for (const r of db.sandboxGrants.rows()) {
        if (r.expiresAt <= nowSeconds && db.sandboxGrants.delete(ctx.tx, r.id)) pruned++
      }
      return pruned
    },
  }
}
