import type { GrantStore } from '../ports/decision-state.js'
import type { SqlHandle } from './sql-handle.js'

export function createGrantStore(sql: SqlHandle): GrantStore {
  return {
    async insert(g) {
      await sql`insert into grants (id, tenant_id, verb, target, principal_id, environment, reason, created_at, expires_at)
                values (${g.grantId}, ${g.tenantId}, ${g.verb}, ${g.target}, ${g.principalId}, ${g.environment},
                        ${g.reason}, ${g.createdAt}, ${g.expiresAt})`
    },
    async markConsumed(tenantId, grantId, at, receiptId) {
      await sql`update grants set consumed_at = ${at}, consumed_by = ${receiptId}
                where tenant_id = ${tenantId} and id = ${grantId} and consumed_at is null`
    },
    async unmarkConsumed(tenantId, grantId, receiptId) {
      await sql`update grants set consumed_at = null, consumed_by = null
                where tenant_id = ${tenantId} and id = ${grantId} and consumed_by = ${receiptId}`
    },
    async renameVerb(tenantId, from, to) {
      const rows = await sql`update grants set verb = ${to}
                             where tenant_id = ${tenantId} and verb = ${from} and consumed_at is null returning id`
      return rows.length
    },
  }
}
