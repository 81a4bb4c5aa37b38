import type { Clock } from '../core/clock.js'
import { nowSeconds } from '../core/clock.js'
import { ERRORS, fail } from '../core/errors.js'
import { backupCodeMatches, normalizeBackupCode } from '../security/backup-codes.js'
import { type Keyring, openSecret } from '../security/keyring.js'
import { matchTotpStep } from '../security/totp.js'
import type { Stores } from '../store/ports/index.js'

export type Verification = 'totp' | 'backup_code'

export interface StepUpVerifier {
  /** Accepts the tenant's authenticator code or an unused backup code, once; else 401 totp_invalid. */
  verify(tenantId: string, code: string): Promise<Verification>
}

const BACKUP_CODE_SHAPE = /^[23456789ABCDEFGHJKMNPQRSTVWXYZ]{10}$/

/**
 * The human's step-up: a 6-digit TOTP code (one step of drift either way) whose time step
 * is above every step accepted before (RFC 6238 §5.2, so a code works once), or one of the
 * tenant's backup codes, each usable once.
 */
export function createStepUpVerifier(deps: {
  stores: Stores
  keyring: Keyring
  clock: Clock
}): StepUpVerifier {
  const { stores, keyring, clock } = deps
  const invalid = (reason: string): never => fail(ERRORS.totpInvalid, { reason })

  return {
    async verify(tenantId, code) {
      const trimmed = code.trim()
      if (/^\d{6}$/.test(trimmed)) {
        const enrolled = await stores.totp.secret(tenantId)
        if (!enrolled) return invalid('not_enrolled')
        const secret = openSecret(keyring, enrolled.secretEnc, `totp:${tenantId}`)
        const step = await matchTotpStep(secret, trimmed, nowSeconds(clock))
        if (step === null) return invalid('wrong_code')
        if (!(await stores.totp.acceptStep(tenantId, step))) return invalid('replayed')
        return 'totp'
      }
      if (!BACKUP_CODE_SHAPE.test(normalizeBackupCode(trimmed))) return invalid('wrong_code')
      for (const c of await stores.totp.unusedBackupCodes(tenantId)) {
        if (!(await backupCodeMatches(trimmed, c.salt, c.hash))) continue
        if (await stores.totp.useBackupCode(tenantId, c.index, nowSeconds(clock))) return 'backup_code'
        return invalid('replayed')
      }
      return invalid('wrong_code')
    },
  }
}
