import type { Clock } from '../core/clock.js'
import { nowSeconds } from '../core/clock.js'
import { ERRORS, fail } from '../core/errors.js'
import { backupCodeMatches, normalizeBackupCode } from '../security/backup-codes.js'
import { type Keyring, openSecret } from '../security/keyring.js'
import { matchTotpStep } from '../security/totp.js'
import type { Stores } from '../store/ports/index.js'

export type Verification = 'totp' | 'backup_code'

/** A code that matched and was unused when checked: what `consume` uses up. */
export type StepUpProof = { kind: 'totp'; step: number } | { kind: 'backup_code'; index: number }

export interface StepUpVerifier {
  /**
   * Whether the code is the tenant's authenticator code (not used before) or an unused backup
   * code; else 401 totp_invalid. Uses nothing up: a later failure must not cost the human the code.
   */
  check(tenantId: string, code: string): Promise<StepUpProof>
  /**
   * Uses the code up, in the caller's transaction (the one that claims what it approves); 401
   * totp_invalid `replayed` if it was used meanwhile, which rolls that transaction back.
   */
  consume(stores: Stores, tenantId: string, proof: StepUpProof): Promise<Verification>
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
    async check(tenantId, code) {
      const trimmed = code.trim()
      if (/^\d{6}$/.test(trimmed)) {
        const enrolled = await stores.totp.secret(tenantId)
        if (!enrolled) return invalid('not_enrolled')
        const secret = openSecret(keyring, enrolled.secretEnc, `totp:${tenantId}`)
        const step = await matchTotpStep(secret, trimmed, nowSeconds(clock))
        if (step === null) return invalid('wrong_code')
        if (enrolled.lastUsedStep !== null && step <= enrolled.lastUsedStep) return invalid('replayed')
        return { kind: 'totp', step }
      }
      if (!BACKUP_CODE_SHAPE.test(normalizeBackupCode(trimmed))) return invalid('wrong_code')
      for (const c of await stores.totp.unusedBackupCodes(tenantId)) {
        if (await backupCodeMatches(trimmed, c.salt, c.hash)) return { kind: 'backup_code', index: c.index }
      }
      return invalid('wrong_code')
    },

    async consume(tx, tenantId, proof) {
      if (proof.kind === 'totp') {
        if (!(await tx.totp.acceptStep(tenantId, proof.step))) return invalid('replayed')
        return 'totp'
      }
      if (!(await tx.totp.useBackupCode(tenantId, proof.index, nowSeconds(clock)))) return invalid('replayed')
      return 'backup_code'
    },
  }
}
