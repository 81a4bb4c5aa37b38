import type { PortalSessionRecord, PortalSessionStore } from '../ports/portal-sessions.js'
import type { SqlHandle } from './sql-handle.js'

interface Row {
  session_hash: string
  tenant_id: string
  key_id: string
  principal_id: string
  created_at: number
  last_seen_at: number
  expires_at: number
}

export function createPortalSessionStore(sql: SqlHandle): PortalSessionStore {
  return {
    async create(s) {
      await sql`insert into portal_sessions
                  (session_hash, tenant_id, key_id, principal_id, created_at, last_seen_at, expires_at)
                values (${s.sessionHash}, ${s.tenantId}, ${s.keyId}, ${s.principalId},
                        ${s.createdAt}, ${s.lastSeenAt}, ${s.expiresAt})`
    },
    async find(sessionHash) {
      const [r] = await sql<Row[]>`select * from portal_sessions where session_hash = ${sessionHash}`
      if (!r) return null
      const record: PortalSessionRecord = {
        sessionHash: r.session_hash,
        tenantId: r.tenant_id,
        keyId: r.key_id,
        principalId: r.principal_id,
        createdAt: Number(r.created_at),
        lastSeenAt: Number(r.last_seen_at),
        expiresAt: Number(r.expires_at),
      }
      return record
    },
    async touch(sessionHash, at) {
      await sql`update portal_sessions set last_seen_at = ${at}
                where session_hash = ${sessionHash} and last_seen_at < ${at}`
    },
    async remove(sessionHash) {
      const rows =
        await sql`delete from portal_sessions where session_hash = ${sessionHash} returning session_hash`
      return rows.length > 0
    },
    async purge(now, idleBefore) {
      const rows = await sql`delete from portal_sessions
                             where expires_at <= ${now} or last_seen_at < ${idleBefore}
                             returning session_hash`
      return rows.length
    },
    async removeTenant(tenantId) {
      const rows = await sql`delete from portal_sessions where tenant_id = ${tenantId} returning session_hash`
      return rows.length
    },
  }
}
