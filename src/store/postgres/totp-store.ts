import type { TotpStore } from '../ports/identity.js'
import { numOrNull, type SqlHandle } from './sql-handle.js'

export function createTotpStore(sql: SqlHandle): TotpStore {
  return {
    async enrol(tenantId, secretEnc, at, codes, replaces) {
      // Conditional on the enrolment the caller replaces: of two racing re-enrolments one wins,
      // and the other hands out no secret that would never work.
      const rows =
        replaces === null
          ? await sql`insert into tenant_totp (tenant_id, secret_enc, created_at)
                      values (${tenantId}, ${secretEnc}, ${at})
                      on conflict (tenant_id) do nothing returning tenant_id`
          : await sql`update tenant_totp
                      set secret_enc = ${secretEnc}, created_at = ${at}, last_used_step = null,
                          wrong_codes = 0, wrong_codes_at = null
                      where tenant_id = ${tenantId} and secret_enc = ${replaces} returning tenant_id`
      if (rows.length !== 1) return false
      await sql`delete from backup_codes where tenant_id = ${tenantId}`
      for (const c of codes) {
        await sql`insert into backup_codes (tenant_id, code_index, salt, hash)
                  values (${tenantId}, ${c.index}, ${c.salt}, ${c.hash})`
      }
      return true
    },
    async secret(tenantId) {
      const [r] = await sql<{ secret_enc: string; last_used_step: number | null }[]>`
        select secret_enc, last_used_step from tenant_totp where tenant_id = ${tenantId}`
      return r ? { secretEnc: r.secret_enc, lastUsedStep: numOrNull(r.last_used_step) } : null
    },
    async newestSecrets(limit) {
      // Once, at start-up: no index on created_at, a scan of one row per tenant.
      const rows = await sql<{ tenant_id: string; secret_enc: string }[]>`
        select tenant_id, secret_enc from tenant_totp
        order by created_at desc limit ${limit}`
      return rows.map((r) => ({ tenantId: r.tenant_id, secretEnc: r.secret_enc }))
    },
    async countCodeTried(tenantId, at, limit, drainPerSecond) {
      // One statement: both expressions read the row as it was, under its lock.
      const [r] = await sql<{ wrong_codes: number }[]>`
        update tenant_totp set
          wrong_codes = case
            when wrong_codes > ${limit}::double precision then wrong_codes + 1
            else greatest(0, wrong_codes - greatest(0, ${at}::bigint - coalesce(wrong_codes_at, ${at}::bigint))
                                           * ${drainPerSecond}::double precision) + 1
          end,
          wrong_codes_at = ${at}::bigint
        where tenant_id = ${tenantId} returning wrong_codes`
      return r ? Number(r.wrong_codes) : null
    },
    async uncountCodeTried(tenantId, limit) {
      const rows = await sql`update tenant_totp set wrong_codes = greatest(wrong_codes - 1, 0)
                             where tenant_id = ${tenantId} and wrong_codes <= ${limit}
                             returning tenant_id`
      return rows.length === 1
    },
    async acceptStep(tenantId, step, enrolment) {
      const rows = await sql`update tenant_totp set last_used_step = ${step}
                             where tenant_id = ${tenantId} and secret_enc = ${enrolment}
                               and (last_used_step is null or last_used_step < ${step})
                             returning tenant_id`
      return rows.length === 1
    },
    async unusedBackupCodes(tenantId) {
      const rows = await sql<{ code_index: number; salt: string; hash: string }[]>`
        select code_index, salt, hash from backup_codes
        where tenant_id = ${tenantId} and used_at is null order by code_index`
      return rows.map((r) => ({ index: r.code_index, salt: r.salt, hash: r.hash, usedAt: null }))
    },
    async useBackupCode(tenantId, index, at, enrolment) {
      const rows = await sql`update backup_codes set used_at = ${at}
                             where tenant_id = ${tenantId} and code_index = ${index} and used_at is null
                               and exists (select 1 from tenant_totp
                                           where tenant_id = ${tenantId} and secret_enc = ${enrolment})
                             returning code_index`
      return rows.length === 1
    },
  }
}
