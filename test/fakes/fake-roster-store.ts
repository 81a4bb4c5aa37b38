import type { RosterEntry, RosterStore, RosterTarget } from '../../src/store/ports/decision-state.js'
import { type FakeContext, key, type RevocationRow } from './fake-database.js'
import { violation } from './fake-policy-store.js'

const idOf = (t: RosterTarget): string => (t.kind === 'all' ? '' : t.id)

/** Text order of the test databases' collation (C.UTF-8 on Postgres, C on PGlite): UTF-8 bytes. */
const byText = (a: string, b: string): number => Buffer.compare(Buffer.from(a), Buffer.from(b))

const toEntry = (r: RevocationRow): RosterEntry => ({
  target: r.targetKind === 'all' ? { kind: 'all' as const } : { kind: r.targetKind, id: r.targetId },
  reason: r.reason,
  revokedAt: r.revokedAt,
})

/** In-memory RosterStore (table revocations), mirroring src/store/postgres/roster-store.ts. */
export function createFakeRosterStore(ctx: FakeContext): RosterStore {
  const { db } = ctx

  return {
    async add(tenantId, target, reason, at) {
      const kind = target.kind
      if (kind !== 'all' && kind !== 'principal' && kind !== 'key') {
        throw violation('revocations_target_kind_check', '23514')
      }
      const k = key(tenantId, kind, idOf(target))
      const r = db.revocations.get(k)
      // A live entry keeps its first reason and time; a lifted one is revoked again.
      if (r && r.liftedAt === null) return false
      if (!r && !db.tenants.has(tenantId)) throw violation('revocations_tenant_id_fkey', '23503')
      db.revocations.set(ctx.tx, k, {
        tenantId,
        targetKind: kind,
        targetId: idOf(target),
        reason: reason ?? null,
        revokedAt: at,
        liftedAt: null,
      })
      return true
    },
    async remove(tenantId, target, at) {
      const k = key(tenantId, target.kind, idOf(target))
      const r = db.revocations.get(k)
      if (!r || r.liftedAt !== null) return false
      db.revocations.set(ctx.tx, k, { ...r, liftedAt: at })
      return true
    },
    async list(tenantId) {
      return db.revocations
        .rows()
        .filter((r) => r.tenantId === tenantId && r.liftedAt === null)
        .sort(
          (a, b) =>
            a.revokedAt - b.revokedAt || byText(a.targetKind, b.targetKind) || byText(a.targetId, b.targetId),
        )
        .map(toEntry)
    },
  }
}
