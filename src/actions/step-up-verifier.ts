import type { AuditLog } from '../audit/audit-log.js'
import type { Clock } from '../core/clock.js'
import { nowSeconds } from '../core/clock.js'
import { ERRORS, fail } from '../core/errors.js'
import { credentialReceipt } from '../identity/credential-receipt.js'
import type { Logger } from '../observability/logger.js'
import { backupCodeMatches, normalizeBackupCode } from '../security/backup-codes.js'
import { type Keyring, openSecret, totpSecretAad } from '../security/keyring.js'
import { matchTotpStep } from '../security/totp.js'
import type { Stores } from '../store/ports/index.js'

export type Verification = 'totp' | 'backup_code'

/**
 * A code that matched and was unused when checked: what `consume` uses up. `enrolment` is the
 * sealed secret it was checked against: a re-enrolment in between voids it.
 */
export type StepUpProof =
  | { kind: 'totp'; step: number; enrolment: string }
  | { kind: 'backup_code'; index: number; enrolment: string }

export interface StepUpVerifier {
  /**
   * Whether the code is the tenant's authenticator code (not used before) or an unused backup
   * code; else 401 totp_invalid, or 403 step_up_locked once too many wrong codes were tried.
   * Counts the code as wrong before it checks it (`consume` takes a right one back), and uses
   * nothing up: a later failure must not cost the human the code.
   */
  check(tenantId: string, code: string): Promise<StepUpProof>
  /**
   * Uses the code up, in the caller's transaction (the one that claims what it approves), and
   * takes back its count: 401 totp_invalid `replayed` if it was used meanwhile or the
   * authenticator re-enrolled since the check, 403 step_up_locked if the lock engaged meanwhile.
   * Either rolls that transaction back.
   */
  consume(stores: Stores, tenantId: string, proof: StepUpProof): Promise<Verification>
}

/**
 * Wrong codes a tenant's authenticator takes, across the portal's sign-in and approvals, as a
 * bucket of `MAX_WRONG_CODES` that drains by as many every `WRONG_CODE_DRAIN_SECONDS`: when it
 * overflows the authenticator is locked, and stays locked (the bucket no longer drains) until
 * the sponsor re-enrols it. So at most 100 wrong codes are checked in any span, plus 100 for
 * every 30 days of it. The rate limits slow guessing; this bounds it. By default they allow 30
 * sign-ins and 30 approval codes a tenant per 10 minutes: 8,640 guesses a day, each right with
 * odds of 3 in a million (three steps accepted), about 2.6% a day. A right code takes back only
 * its own count, never the rest: were it to clear them (NIST SP 800-63B §5.2.2 caps
 * *consecutive* failures at 100), a stolen admin key would get 99 guesses between any two
 * approvals its tenant's humans make.
 */
export const MAX_WRONG_CODES = 100
export const WRONG_CODE_DRAIN_SECONDS = 30 * 24 * 3600

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
  audit: AuditLog
  logger: Logger
}): StepUpVerifier {
  const { stores, keyring, clock, audit, logger } = deps
  const invalid = (reason: string): never => fail(ERRORS.totpInvalid, { reason })

  /** Counts the code as wrong before it is checked; past the limit, refuses it unchecked, right or not. */
  async function countTried(tenantId: string): Promise<void> {
    const tried = await stores.totp.countCodeTried(
      tenantId,
      nowSeconds(clock),
      MAX_WRONG_CODES,
      MAX_WRONG_CODES / WRONG_CODE_DRAIN_SECONDS,
    )
    if (tried === null) return invalid('not_enrolled')
    if (tried <= MAX_WRONG_CODES) return
    // Once, as the lock engages: the authenticator is out of use until the sponsor re-enrols it.
    // (The level before this code was within the limit.)
    // Its failure does not undo the lock, which is in Postgres already: the refusal stands, and
    // each refused attempt is on record by its caller (APPROVAL_FAILED, PORTAL_SIGN_IN_FAILED).
    if (tried - 1 <= MAX_WRONG_CODES)
      await audit
        .append([
          credentialReceipt({
            tenantId,
            kind: 'CREDENTIAL_REVOKED',
            credential: 'totp',
            at: nowSeconds(clock),
            actor: { type: 'writegate' },
            detail: { reason: 'too_many_wrong_codes', limit: MAX_WRONG_CODES },
          }),
        ])
        .catch((err) => logger.error({ err, tenantId }, 'step-up: the lock could not be put on record'))
    fail(ERRORS.stepUpLocked, { limit: MAX_WRONG_CODES })
  }

  /**
   * The authenticator's secret. One sealed under another master key (start-up refuses a key that
   * opens none of the stored secrets, but a tenant may have enrolled under another) cannot check
   * any code: 503 totp_unreadable, the code's count taken back (it was not checked), and one
   * warning, the re-enrolment being the sponsor's to do.
   */
  async function openEnrolment(tenantId: string, enrolment: string): Promise<string> {
    try {
      return openSecret(keyring, enrolment, totpSecretAad(tenantId))
    } catch (err) {
      await stores.totp.uncountCodeTried(tenantId, MAX_WRONG_CODES)
      logger.warn(
        { tenantId, cause: (err as Error).message },
        "step-up: the authenticator's secret does not open with this master key (sealed under another); the sponsor must re-enrol it (POST /v1/sponsor/totp)",
      )
      return fail(ERRORS.totpUnreadable)
    }
  }

  return {
    async check(tenantId, code) {
      const trimmed = code.trim()
      const totpShaped = /^\d{6}$/.test(trimmed)
      // A code of neither shape can match nothing: refused without counting.
      if (!totpShaped && !BACKUP_CODE_SHAPE.test(normalizeBackupCode(trimmed))) return invalid('wrong_code')
      await countTried(tenantId)
      const enrolled = await stores.totp.secret(tenantId)
      if (!enrolled) return invalid('not_enrolled')
      const enrolment = enrolled.secretEnc
      if (totpShaped) {
        const secret = await openEnrolment(tenantId, enrolment)
        const step = await matchTotpStep(secret, trimmed, nowSeconds(clock))
        if (step === null) return invalid('wrong_code')
        if (enrolled.lastUsedStep !== null && step <= enrolled.lastUsedStep) return invalid('replayed')
        return { kind: 'totp', step, enrolment }
      }
      for (const c of await stores.totp.unusedBackupCodes(tenantId)) {
        if (await backupCodeMatches(trimmed, c.salt, c.hash))
          return { kind: 'backup_code', index: c.index, enrolment }
      }
      return invalid('wrong_code')
    },

    async consume(tx, tenantId, proof) {
      // Locked by guesses made while this one was checked: it does not unlock it. First, so the
      // authenticator's row is locked before a backup code's, in the order a re-enrolment takes them.
      if (!(await tx.totp.uncountCodeTried(tenantId, MAX_WRONG_CODES)))
        fail(ERRORS.stepUpLocked, { limit: MAX_WRONG_CODES })
      // Used already, or the authenticator re-enrolled since the check: no longer this code's.
      if (proof.kind === 'totp') {
        if (!(await tx.totp.acceptStep(tenantId, proof.step, proof.enrolment))) return invalid('replayed')
      } else if (!(await tx.totp.useBackupCode(tenantId, proof.index, nowSeconds(clock), proof.enrolment)))
        return invalid('replayed')
      return proof.kind
    },
  }
}
