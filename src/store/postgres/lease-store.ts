import type { Lease, LeaseStore } from '../ports/decision-state.js'
import { numOrNull, type SqlHandle } from './sql-handle.js'

interface LeaseRow {
  id: string
  tenant_id: string
  key_id: string
  principal_id: string
  verb: string
  target: string | null
  system_id: string
  binding: string
  created_at: number
  expires_at: number
  used_at: number | null
}

const toLease = (r: LeaseRow): Lease => ({
  leaseId: r.id,
  tenantId: r.tenant_id,
  keyId: r.key_id,
  principalId: r.principal_id,
  verb: r.verb,
  target: r.target,
  systemId: r.system_id,
  binding: r.binding,
  createdAt: Number(r.created_at),
  expiresAt: Number(r.expires_at),
  usedAt: numOrNull(r.used_at),
})

export function createLeaseStore(sql: SqlHandle): LeaseStore {
  return {
    async insert(l) {
      await sql`insert into leases (id, tenant_id, key_id, principal_id, verb, target, system_id, binding, created_at, expires_at)
                values (${l.leaseId}, ${l.tenantId}, ${l.keyId}, ${l.principalId}, ${l.verb}, ${l.target}, ${l.systemId},
                        ${l.binding}, ${l.createdAt}, ${l.expiresAt})`
    },
    async insertIfAbsent(l) {
      await sql`insert into leases (id, tenant_id, key_id, principal_id, verb, target, system_id, binding, created_at, expires_at)
                values (${l.leaseId}, ${l.tenantId}, ${l.keyId}, ${l.principalId}, ${l.verb}, ${l.target}, ${l.systemId},
                        ${l.binding}, ${l.createdAt}, ${l.expiresAt})
                on conflict (id) do nothing`
    },
    async get(tenantId, leaseId) {
      const [r] = await sql<
        LeaseRow[]
      >`select * from leases where tenant_id = ${tenantId} and id = ${leaseId}`
      return r ? toLease(r) : null
    },
    async consume(tenantId, leaseId, at) {
      const rows = await sql`update leases set used_at = ${at}
                             where tenant_id = ${tenantId} and id = ${leaseId} and used_at is null returning id`
      return rows.length === 1
    },
  }
}
