import type { RosterStore, RosterTarget } from '../ports/decision-state.js'
import type { SqlHandle } from './sql-handle.js'

const kindOf = (t: RosterTarget) => t.kind
const idOf = (t: RosterTarget) => (t.kind === 'all' ? '' : t.id)

export function createRosterStore(sql: SqlHandle): RosterStore {
  return {
    async add(tenantId, target, reason, at) {
      // A lifted entry is revoked again; a live one keeps its first reason and time.
      const rows = await sql`insert into revocations (tenant_id, target_kind, target_id, reason, revoked_at)
                             values (${tenantId}, ${kindOf(target)}, ${idOf(target)}, ${reason}, ${at})
                             on conflict (tenant_id, target_kind, target_id) do update
                               set reason = excluded.reason, revoked_at = excluded.revoked_at, lifted_at = null
                               where revocations.lifted_at is not null
                             returning tenant_id`
      return rows.length === 1
    },
    async remove(tenantId, target, at) {
      const rows = await sql`update revocations set lifted_at = ${at}
                             where tenant_id = ${tenantId} and target_kind = ${kindOf(target)}
                               and target_id = ${idOf(target)} and lifted_at is null
                             returning tenant_id`
      return rows.length === 1
    },
    async list(tenantId) {
      const rows = await sql<
        {
          target_kind: 'all' | 'principal' | 'key'
          target_id: string
          reason: string | null
          revoked_at: number
        }[]
      >`
        select target_kind, target_id, reason, revoked_at from revocations
        where tenant_id = ${tenantId} and lifted_at is null order by revoked_at, target_kind, target_id`
      return rows.map((r) => ({
        target: r.target_kind === 'all' ? { kind: 'all' as const } : { kind: r.target_kind, id: r.target_id },
        reason: r.reason,
        revokedAt: Number(r.revoked_at),
      }))
    },
  }
}
