import type { SandboxGrantStore } from '../ports/decision-state.js'
import type { SqlHandle } from './sql-handle.js'

export function createSandboxGrantStore(sql: SqlHandle): SandboxGrantStore {
  return {
    async insert(g) {
      await sql`insert into sandbox_grants (id, verb, target, created_at, expires_at)
                values (${g.grantId}, ${g.verb}, ${g.target}, ${g.createdAt}, ${g.expiresAt})`
    },
    async pruneExpired(nowSeconds) {
      const rows = await sql`delete from sandbox_grants where expires_at <= ${nowSeconds} returning id`
      return rows.length
    },
  }
}
