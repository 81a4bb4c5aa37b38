import type { TotpStore } from '../../src/store/ports/identity.js'
import { ConstraintViolation, type FakeContext, key } from './fake-database.js'

/** In-memory TotpStore (tables tenant_totp, backup_codes), mirroring src/store/postgres/totp-store.ts. */
export function createFakeTotpStore(ctx: FakeContext): TotpStore {
  const { db } = ctx
  return {
    async enrol(tenantId, secretEnc, at, codes, replaces) {
      const current = db.totp.get(tenantId)
      if (replaces === null) {
        // insert … on conflict (tenant_id) do nothing
        if (current) return false
        if (!db.tenants.has(tenantId)) throw new ConstraintViolation('tenant_totp_tenant_id_fkey')
      } else if (!current || current.secretEnc !== replaces) {
        return false
      }
      db.totp.set(ctx.tx, tenantId, {
        tenantId,
        secretEnc,
        createdAt: at,
        lastUsedStep: null,
        wrongCodes: 0,
        wrongCodesAt: null,
      })
      // Every old code goes, used or not; the new ones start unused.
      for (const c of db.backupCodes.rows()) {
        if (c.tenantId === tenantId) db.backupCodes.delete(ctx.tx, key(tenantId, c.index))
      }
      // One insert per code, as the SQL: a repeated index fails there, after the earlier writes.
      for (const c of codes) {
        const k = key(tenantId, c.index)
        if (db.backupCodes.has(k)) throw new ConstraintViolation('backup_codes_pkey')
        db.backupCodes.set(ctx.tx, k, { tenantId, index: c.index, salt: c.salt, hash: c.hash, usedAt: null })
      }
      return true
    },
    async secret(tenantId) {
      const r = db.totp.get(tenantId)
      return r ? { secretEnc: r.secretEnc, lastUsedStep: r.lastUsedStep } : null
    },
    async newestSecrets(limit) {
      return db.totp
        .rows()
        .sort((a, b) => b.createdAt - a.createdAt)
        .slice(0, limit)
        .map((r) => ({ tenantId: r.tenantId, secretEnc: r.secretEnc }))
    },
    async countCodeTried(tenantId, at, limit, drainPerSecond) {
      const r = db.totp.get(tenantId)
      if (!r) return null
      const drained = Math.max(0, at - (r.wrongCodesAt ?? at)) * drainPerSecond
      const wrongCodes = r.wrongCodes > limit ? r.wrongCodes + 1 : Math.max(0, r.wrongCodes - drained) + 1
      db.totp.set(ctx.tx, tenantId, { ...r, wrongCodes, wrongCodesAt: at })
      return wrongCodes
    },
    async uncountCodeTried(tenantId, limit) {
      const r = db.totp.get(tenantId)
      if (!r || r.wrongCodes > limit) return false
      db.totp.set(ctx.tx, tenantId, { ...r, wrongCodes: Math.max(r.wrongCodes - 1, 0) })
      return true
    },
    async acceptStep(tenantId, step, enrolment) {
      const r = db.totp.get(tenantId)
      if (!r || r.secretEnc !== enrolment || (r.lastUsedStep !== null && r.lastUsedStep >= step)) return false
      db.totp.set(ctx.tx, tenantId, { ...r, lastUsedStep: step })
      return true
    },
    async unusedBackupCodes(tenantId) {
      return db.backupCodes
        .rows()
        .filter((c) => c.tenantId === tenantId && c.usedAt === null)
        .sort((a, b) => a.index - b.index)
        .map((c) => ({ index: c.index, salt: c.salt, hash: c.hash, usedAt: null }))
    },
    async useBackupCode(tenantId, index, at, enrolment) {
      const k = key(tenantId, index)
      const c = db.backupCodes.get(k)
      if (!c || c.usedAt !== null || db.totp.get(tenantId)?.secretEnc !== enrolment) return false
      db.backupCodes.set(ctx.tx, k, { ...c, usedAt: at })
      return true
    },
  }
}
