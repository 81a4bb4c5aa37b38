import type { AuditLog } from '../audit/audit-log.js'
import type { Clock } from '../core/clock.js'
import { nowSeconds } from '../core/clock.js'
import { classifyCredential, newApiKey, newInviteCode, newSponsorToken } from '../core/credentials.js'
import { ERRORS, fail } from '../core/errors.js'
import { isPrincipalActive, type KeyScope, type Principal } from '../core/identity.js'
import { newId } from '../core/ids.js'
import { normalizeEmail } from '../core/names.js'
import { draft, type ReceiptDraft } from '../core/receipt.js'
import { hashSecret } from '../core/secret-hash.js'
import type { DecisionStateSink } from '../gate/decision-state.js'
import type { Gate } from '../gate/gate.js'
import type { Logger } from '../observability/logger.js'
import { BACKUP_CODE_COUNT, hashBackupCode, newBackupCode } from '../security/backup-codes.js'
import { type Keyring, sealSecret } from '../security/keyring.js'
import { newTotpEnrolment } from '../security/totp.js'
import type { HotStore } from '../store/ports/hot-store.js'
import type { Invite, Stores, SystemOfRecord } from '../store/ports/index.js'
import type { Authenticator } from './authenticator.js'
import { actorOf, type KeyCaller } from './caller.js'
import { credentialReceipt } from './credential-receipt.js'
import { ensureDefaultPrincipal } from './default-principal.js'

export const INVITE_TTL_SECONDS = 7 * 24 * 3600

export interface IssueKeyInput {
  email: string
  tenantName?: string | undefined
  inviteCode?: string | undefined
  principalId?: string | undefined
  scope?: KeyScope | undefined
  /** The bearer credential sent with the request, offered as same-email proof. */
  bearer?: string | undefined
}

export interface IssuedKey {
  apiKey: string
  keyId: string
  tenantId: string
  principalId: string
  scope: KeyScope
  sponsorToken?: string
  totp?: { secret: string; otpauthUrl: string; backupCodes: string[] }
}

export interface IssuanceService {
  issueKey(input: IssueKeyInput): Promise<IssuedKey>
  createInvite(caller: KeyCaller): Promise<{ inviteCode: string; tenantId: string; expiresAt: number }>
  /**
   * Re-enrols the tenant authenticator (POST /v1/sponsor/totp); the old secret and backup codes
   * stop working. Of two racing re-enrolments the later fails (409 `credential_changed`).
   */
  enrolTotp(
    tenantId: string,
    label: string,
  ): Promise<{ secret: string; otpauthUrl: string; backupCodes: string[] }>
  /**
   * Replaces the sponsor token `presented` (POST /v1/sponsor/rotate); it stops working at once.
   * Of two racing rotations of one token the later fails (409 `credential_changed`).
   */
  rotateSponsorToken(tenantId: string, presented: string): Promise<string>
}

export interface IssuanceDeps {
  sor: SystemOfRecord
  audit: AuditLog
  auth: Authenticator
  keyring: Keyring
  clock: Clock
  decisionState: DecisionStateSink
  /** Where proxies look their API key up (the hot store). */
  keyIndex: Pick<HotStore, 'indexKey'>
  /** Whether a key may act right now (not on the sponsor's roster), judged linearizably. */
  standing: Gate['standing']
  logger: Logger
  sameEmail: 'proof' | 'open'
  /** scrypt's cost (log2 N) for new backup codes; the default but in tests (backup-codes.ts). */
  backupCodeCost?: number
}

type Target =
  | { kind: 'new' }
  /** `pinnedPrincipal`: an agent-scoped proof mints keys only for its own principal. */
  | { kind: 'existing'; tenantId: string; maxScope: KeyScope; pinnedPrincipal?: string }

export function createIssuanceService(deps: IssuanceDeps): IssuanceService {
  const { sor, audit, auth, keyring, clock, decisionState } = deps

  /** The tenant a bearer is a live credential of (a sponsor token, or a key not revoked); null for none. */
  async function tenantOfCredential(bearer: string): Promise<string | null> {
    const kind = classifyCredential(bearer)
    if (kind === 'sponsor') return (await auth.sponsor(bearer))?.tenantId ?? null
    if (kind === 'apiKey') {
      const k = await auth.apiKey(bearer)
      return k && !k.dead ? k.tenantId : null
    }
    return null
  }

  /**
   * Why an invite no longer speaks for its tenant, if it does not: the key that made it was
   * revoked (or deleted), its principal was disabled or deleted, or the sponsor's
   * roster names either. An invite is an admin key waiting to be minted; a key barred from
   * admin work must not have left one behind.
   */
  async function issuerWithdrawn(invite: Invite, stores: Stores = sor.stores): Promise<string | null> {
    if (invite.issuerKeyId === null) return null
    const key = await stores.keys.get(invite.tenantId, invite.issuerKeyId)
    if (!key || key.revokedAt !== null) return 'issuer_revoked'
    const principal = await stores.principals.get(invite.tenantId, key.principalId)
    if (!principal || !isPrincipalActive(principal)) return 'issuer_disabled'
    const barred = await auth.rosterBar(
      { tenantId: invite.tenantId, keyId: key.id, principalId: key.principalId },
      stores,
    )
    return barred ? 'issuer_barred' : null
  }

  /** Which tenant the key joins, and the widest scope the proof allows. */
  async function resolveTarget(email: string, input: IssueKeyInput): Promise<Target> {
    const now = nowSeconds(clock)
    if (input.inviteCode !== undefined) {
      const invite = await sor.stores.invites.findByHash(hashSecret(input.inviteCode))
      if (!invite || invite.expiresAt <= now) fail(ERRORS.invalidInvite)
      const withdrawn = await issuerWithdrawn(invite)
      if (withdrawn) fail(ERRORS.invalidInvite, { reason: withdrawn })
      return { kind: 'existing', tenantId: invite.tenantId, maxScope: 'admin' }
    }
    // Without a credential or an invite, a principal_id can only name a principal of a tenant
    // the caller must prove: one answer whatever the email (found in review: a made-up one got
    // 409 for an email that owns a tenant, 404 for one that does not, and left nothing behind).
    if (input.principalId !== undefined && !input.bearer && deps.sameEmail !== 'open')
      fail(ERRORS.proofRequired, undefined, {
        message: 'a principal_id needs proof of its tenant: send an API key or a sponsor token',
      })
    const owned = await sor.stores.tenants.tenantOfEmail(email)
    // A credential sent with an email that owns no tenant is a mistake (a typo, usually, when
    // minting an agent key for one's own tenant), never a request for a new tenant: it would
    // silently create one whose only key is whatever scope was asked for.
    if (input.bearer) {
      // One answer for an email outside the credential's own tenant, whether it owns another or
      // none, and one for a credential that does not hold, whatever the email (found in review:
      // a made-up bearer, then a free key of a tenant of one's own, told which emails own one).
      const held = await tenantOfCredential(input.bearer)
      if (held !== null && owned !== held) fail(ERRORS.emailNotInTenant)
      if (owned === null) fail(ERRORS.proofRequired)
    }
    if (owned === null) return { kind: 'new' }
    if (deps.sameEmail === 'open') return { kind: 'existing', tenantId: owned, maxScope: 'admin' }
    const bearer = input.bearer
    const kind = bearer ? classifyCredential(bearer) : null
    if (kind === 'sponsor') {
      const s = await auth.sponsor(bearer)
      if (s?.tenantId === owned) return { kind: 'existing', tenantId: owned, maxScope: 'admin' }
    } else if (kind === 'apiKey') {
      const k = await auth.apiKey(bearer)
      // A key on the sponsor's roster is no proof: it must not mint its way around the kill switch.
      const standing = k && !k.dead && k.tenantId === owned ? await deps.standing(owned, k.keyId) : null
      // The gate not answering is no verdict on the proof: say so, rather than "proof required".
      if (standing?.kind === 'unavailable') fail(ERRORS.gateUnavailable)
      if (k && standing?.kind === 'in_good_standing') {
        return k.scope === 'agent'
          ? { kind: 'existing', tenantId: owned, maxScope: 'agent', pinnedPrincipal: k.principalId }
          : { kind: 'existing', tenantId: owned, maxScope: 'admin' }
      }
    }
    return fail(ERRORS.proofRequired)
  }

  async function enrolmentFor(label: string) {
    const enrolment = newTotpEnrolment('writegate', label)
    const backupCodes = Array.from({ length: BACKUP_CODE_COUNT }, () => newBackupCode())
    const hashed = await Promise.all(backupCodes.map((c) => hashBackupCode(c, deps.backupCodeCost)))
    return { enrolment, backupCodes, hashed: hashed.map((h, index) => ({ index, ...h })) }
  }

  async function storeEnrolment(
    stores: Stores,
    tenantId: string,
    e: Awaited<ReturnType<typeof enrolmentFor>>,
    replaces: string | null,
  ) {
    const stored = await stores.totp.enrol(
      tenantId,
      sealSecret(keyring, e.enrolment.secret, `totp:${tenantId}`),
      nowSeconds(clock),
      e.hashed,
      replaces,
    )
    if (!stored) fail(ERRORS.credentialChanged)
  }

  async function attachPrincipal(
    stores: Stores,
    tenantId: string,
    principalId: string | undefined,
    at: number,
    receipts: ReceiptDraft[],
  ): Promise<Principal> {
    if (principalId !== undefined) {
      const p = await stores.principals.getForUpdate(tenantId, principalId)
      if (!p || p.deletedAt !== null) fail(ERRORS.principalNotFound)
      if (p.disabled) fail(ERRORS.principalInactive)
      return p
    }
    const { principal, created } = await ensureDefaultPrincipal(stores, tenantId, at)
    if (created) {
      receipts.push(
        draft({
          receiptId: newId('receipt'),
          tenantId,
          kind: 'PRINCIPAL_CREATE',
          createdAt: at,
          principalId: principal.id,
          principalName: principal.name,
          detail: { actor: { type: 'issuance' }, disabled: false, auto: true },
        }),
      )
    }
    if (principal.disabled) fail(ERRORS.principalInactive)
    return principal
  }

  return {
    async issueKey(input) {
      const email = normalizeEmail(input.email)
      if (!email)
        fail(
          ERRORS.invalidRequest,
          { issues: [{ path: 'email', message: 'not a valid email address' }] },
          { message: 'invalid body: email: not a valid email address' },
        )
      const target = await resolveTarget(email, input)
      const scope: KeyScope = input.scope ?? (target.kind === 'existing' ? target.maxScope : 'admin')
      if (target.kind === 'existing' && target.maxScope === 'agent' && scope !== 'agent')
        fail(ERRORS.insufficientScope)
      const pinned = target.kind === 'existing' ? target.pinnedPrincipal : undefined
      if (pinned !== undefined && input.principalId !== undefined && input.principalId !== pinned)
        fail(ERRORS.insufficientScope)
      const principalId = pinned ?? input.principalId

      const apiKey = newApiKey()
      const keyId = newId('key')
      // Slow work (scrypt of backup codes) happens before the transaction opens.
      const enrol = target.kind === 'new' ? await enrolmentFor(email) : null
      const sponsorToken = target.kind === 'new' ? newSponsorToken() : undefined

      const result = await sor.transaction(async (stores) => {
        const at = nowSeconds(clock)
        const receipts: ReceiptDraft[] = []
        let tenantId: string
        if (target.kind === 'new') {
          tenantId = newId('tenant')
          await stores.tenants.create({
            id: tenantId,
            // Not the email itself: agents of the tenant can read the name (GET /v1/me).
            name: input.tenantName ?? (email.split('@')[1] as string),
            createdAt: at,
            sponsorHash: hashSecret(sponsorToken as string),
          })
          // Two first requests for one email race here; the loser needs proof like any later request.
          if (!(await stores.tenants.claimEmail(email, tenantId, at))) fail(ERRORS.proofRequired)
          if (enrol) await storeEnrolment(stores, tenantId, enrol, null)
        } else {
          tenantId = target.tenantId
          await stores.tenants.claimEmail(email, tenantId, at)
        }
        await stores.tenants.bumpVersion(tenantId)
        if (input.inviteCode !== undefined) {
          // Again, under the tenant's row lock, which every revocation takes first
          // (gate/state-change.ts): one that committed since the check above is seen here, and
          // one still to come waits until this key exists.
          const invite = await stores.invites.findByHash(hashSecret(input.inviteCode))
          if (!invite || invite.expiresAt <= at) fail(ERRORS.invalidInvite)
          const withdrawn = await issuerWithdrawn(invite, stores)
          if (withdrawn) fail(ERRORS.invalidInvite, { reason: withdrawn })
        }
        const principal = await attachPrincipal(stores, tenantId, principalId, at, receipts)
        await stores.keys.create({
          id: keyId,
          tenantId,
          principalId: principal.id,
          secretHash: hashSecret(apiKey),
          scope,
          email,
          createdAt: at,
        })
        receipts.push(
          draft({
            receiptId: newId('receipt'),
            tenantId,
            kind: 'KEY_ISSUED',
            createdAt: at,
            principalId: principal.id,
            principalName: principal.name,
            keyId,
            detail: {
              scope,
              via: input.inviteCode !== undefined ? 'invite' : target.kind === 'new' ? 'new_tenant' : 'proof',
            },
          }),
        )
        await audit.appendWith(stores, receipts)
        return { tenantId, principalId: principal.id }
      })
      try {
        await deps.keyIndex.indexKey(hashSecret(apiKey), { tenantId: result.tenantId, keyId })
        await decisionState.changed(result.tenantId)
      } catch (err) {
        // The key is committed and its secrets are shown only now, so never answer without
        // them: the reconciler publishes the tenant and indexes the key; until then the
        // tenant's checks fail closed.
        deps.logger.warn(
          { err, tenantId: result.tenantId },
          'issued a key before its publish; the reconciler will finish it',
        )
      }

      const out: IssuedKey = {
        apiKey,
        keyId,
        tenantId: result.tenantId,
        principalId: result.principalId,
        scope,
      }
      if (sponsorToken && enrol) {
        out.sponsorToken = sponsorToken
        out.totp = {
          secret: enrol.enrolment.secret,
          otpauthUrl: enrol.enrolment.otpauthUrl,
          backupCodes: enrol.backupCodes,
        }
      }
      return out
    },

    async createInvite(caller) {
      const code = newInviteCode()
      const createdAt = nowSeconds(clock)
      const expiresAt = createdAt + INVITE_TTL_SECONDS
      await sor.transaction(async (stores) => {
        await stores.invites.rotate(caller.tenantId, hashSecret(code), createdAt, expiresAt, caller.keyId)
        await audit.appendWith(stores, [
          credentialReceipt({
            tenantId: caller.tenantId,
            kind: 'CREDENTIAL_ISSUED',
            credential: 'invite_code',
            at: createdAt,
            actor: actorOf(caller),
            keyId: caller.keyId,
            detail: { expiresAt, replacesPrevious: true },
          }),
        ])
      })
      return { inviteCode: code, tenantId: caller.tenantId, expiresAt }
    },

    async enrolTotp(tenantId, label) {
      // Read before the new one is made: what this request replaces, if nothing replaced it first.
      const current = await sor.stores.totp.secret(tenantId)
      const e = await enrolmentFor(label)
      await sor.transaction(async (stores) => {
        await storeEnrolment(stores, tenantId, e, current?.secretEnc ?? null)
        // A re-enrolment is how a tenant answers a lost or leaked authenticator: the portal
        // sessions it opened end with it.
        const portalSessionsRemoved = await stores.portalSessions.removeTenant(tenantId)
        await audit.appendWith(stores, [
          credentialReceipt({
            tenantId,
            kind: 'CREDENTIAL_ISSUED',
            credential: 'totp',
            at: nowSeconds(clock),
            actor: { type: 'sponsor' },
            detail: { backupCodes: e.backupCodes.length, replacesPrevious: true, portalSessionsRemoved },
          }),
        ])
      })
      return { secret: e.enrolment.secret, otpauthUrl: e.enrolment.otpauthUrl, backupCodes: e.backupCodes }
    },

    async rotateSponsorToken(tenantId, presented) {
      const token = newSponsorToken()
      await sor.transaction(async (stores) => {
        if (!(await stores.tenants.replaceSponsorHash(tenantId, hashSecret(presented), hashSecret(token))))
          fail(ERRORS.credentialChanged)
        await audit.appendWith(stores, [
          credentialReceipt({
            tenantId,
            kind: 'CREDENTIAL_ISSUED',
            credential: 'sponsor_token',
            at: nowSeconds(clock),
            actor: { type: 'sponsor' },
            detail: { replacesPrevious: true },
          }),
        ])
      })
      return token
    },
  }
}
