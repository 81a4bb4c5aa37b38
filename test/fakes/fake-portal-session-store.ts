import type { PortalSessionStore } from '../../src/store/ports/portal-sessions.js'
import { ConstraintViolation, type FakeContext } from './fake-database.js'

/** In-memory PortalSessionStore (table portal_sessions), mirroring src/store/postgres/portal-session-store.ts. */
export function createFakePortalSessionStore(ctx: FakeContext): PortalSessionStore {
  const { db } = ctx
  return {
    async create(s) {
      if (db.portalSessions.has(s.sessionHash)) throw new ConstraintViolation('portal_sessions_pkey')
      if (!db.tenants.has(s.tenantId)) throw new ConstraintViolation('portal_sessions_tenant_id_fkey')
      db.portalSessions.set(ctx.tx, s.sessionHash, {
        sessionHash: s.sessionHash,
        tenantId: s.tenantId,
        keyId: s.keyId,
        principalId: s.principalId,
        createdAt: s.createdAt,
        lastSeenAt: s.lastSeenAt,
        expiresAt: s.expiresAt,
      })
    },
    async find(sessionHash) {
      const r = db.portalSessions.get(sessionHash)
      if (!r) return null
      return {
        sessionHash: r.sessionHash,
        tenantId: r.tenantId,
        keyId: r.keyId,
        principalId: r.principalId,
        createdAt: r.createdAt,
        lastSeenAt: r.lastSeenAt,
        expiresAt: r.expiresAt,
      }
    },
    async touch(sessionHash, at) {
      const r = db.portalSessions.get(sessionHash)
      if (r && r.lastSeenAt < at) db.portalSessions.set(ctx.tx, sessionHash, { ...r, lastSeenAt: at })
    },
    async remove(sessionHash) {
      return db.portalSessions.delete(ctx.tx, sessionHash)
    },
    async purge(now, idleBefore) {
      let n = 0
      for (const r of db.portalSessions.rows()) {
        if (r.expiresAt <= now || r.lastSeenAt < idleBefore) {
          db.portalSessions.delete(ctx.tx, r.sessionHash)
          n++
        }
      }
      return n
    },
    async removeTenant(tenantId) {
      let n = 0
      for (const r of db.portalSessions.rows())
        if (r.tenantId === tenantId) {
          db.portalSessions.delete(ctx.tx, r.sessionHash)
          n++
        }
      return n
    },
  }
}
