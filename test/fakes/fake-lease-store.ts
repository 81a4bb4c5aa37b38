import type { Lease, LeaseStore } from '../../src/store/ports/decision-state.js'
import type { FakeContext, LeaseRow } from './fake-database.js'
import { violation } from './fake-policy-store.js'

const toLease = (r: LeaseRow): Lease => ({
  leaseId: r.id,
  tenantId: r.tenantId,
  keyId: r.keyId,
  principalId: r.principalId,
  verb: r.verb,
  target: r.target,
  systemId: r.systemId,
  binding: r.binding,
  createdAt: r.createdAt,
  expiresAt: r.expiresAt,
  usedAt: r.usedAt,
})

/** In-memory LeaseStore (table leases), mirroring src/store/postgres/lease-store.ts. */
export function createFakeLeaseStore(ctx: FakeContext): LeaseStore {
  const { db } = ctx

  const insert = (l: Omit<Lease, 'usedAt'>): void => {
    if (!db.tenants.has(l.tenantId)) throw violation('leases_tenant_id_fkey', '23503')
    db.leases.set(ctx.tx, l.leaseId, {
      id: l.leaseId,
      tenantId: l.tenantId,
      keyId: l.keyId,
      principalId: l.principalId,
      verb: l.verb,
      target: l.target ?? null,
      systemId: l.systemId,
      binding: l.binding,
      createdAt: l.createdAt,
      expiresAt: l.expiresAt,
      usedAt: null,
    })
  }

  const find = (tenantId: string, id: string): LeaseRow | undefined => {
    const r = db.leases.get(id)
    return r && r.tenantId === tenantId ? r : undefined
  }

  return {
    async insert(l) {
      // The primary key is the id alone: an id is taken across tenants.
      if (db.leases.has(l.leaseId)) throw violation('leases_pkey')
      insert(l)
    },
    async insertIfAbsent(l) {
      // `on conflict (id) do nothing`: any lease with the id, of whichever tenant, wins.
      if (!db.leases.has(l.leaseId)) insert(l)
    },
    async get(tenantId, leaseId) {
      const r = find(tenantId, leaseId)
      return r ? toLease(r) : null
    },
    async consume(tenantId, leaseId, at) {
      const r = find(tenantId, leaseId)
      if (!r || r.usedAt !== null) return false
      db.leases.set(ctx.tx, leaseId, { ...r, usedAt: at })
      return true
    },
  }
}
