import { createHmac } from 'node:crypto'
import type { StepUpProof, StepUpVerifier } from '../actions/step-up-verifier.js'
import type { AuditLog } from '../audit/audit-log.js'
import { type Clock, nowSeconds } from '../core/clock.js'
import { ERRORS, fail, WriteGateError } from '../core/errors.js'
import { isPrincipalActive } from '../core/identity.js'
import { newId } from '../core/ids.js'
import { isBase62, randomBase62 } from '../core/random.js'
import { draft, type ReceiptKind } from '../core/receipt.js'
import { hashSecret } from '../core/secret-hash.js'
import type { Authenticator } from '../identity/authenticator.js'
import type { KeyCaller } from '../identity/caller.js'
import { clientOf } from '../node-http/client-address.js'
import type { Logger } from '../observability/logger.js'
import type { SystemOfRecord } from '../store/ports/index.js'
import type { RateLimitStore } from '../store/ports/rate-limit.js'

export const SESSION_PREFIX = 'wgps_'
const SESSION_RANDOM_LENGTH = 43 // ≈256 bits of base62
/** last-seen is written at most this often, not on every page. */
const TOUCH_EVERY_SECONDS = 30

export interface PortalLimits {
  sessionIdleSeconds: number
  sessionMaxSeconds: number
  signInAttemptsPerIp: number
  signInAttemptsPerTenant: number
  signInWindowSeconds: number
}

/** A live portal session: the admin key that signed in acts through it. */
export interface PortalSession {
  caller: KeyCaller
  /** Proves a form came from a page of this session (docs/portal.md "Security of the page"). */
  csrfToken: string
  createdAt: number
  expiresAt: number
}

export interface PortalSessions {
  /**
   * An admin key plus the tenant's TOTP or backup code. Answers the new cookie value (shown
   * once, stored only hashed) and the session, or refuses with the registry's error; every
   * refusal that names a tenant is on record as PORTAL_SIGN_IN_FAILED.
   */
  signIn(input: {
    apiKey: string
    code: string
    clientIp: string
  }): Promise<{ token: string; session: PortalSession }>
  /**
   * The live session of a cookie value, or null (unknown, expired, signed out, key dead).
   * `touch: false` checks without counting as use: a Live page left open re-checks its session
   * at every keepalive, and must not keep an unattended session from idling out.
   */
  resolve(token: string | undefined, opts?: { touch?: boolean }): Promise<PortalSession | null>
  signOut(token: string): Promise<void>
}

/** The CSRF token is keyed by the session's own secret: the stored hash cannot make one. */
export function csrfTokenOf(token: string): string {
  return createHmac('sha256', token).update('writegate portal csrf v1').digest('base64url')
}

export function createPortalSessions(deps: {
  sor: SystemOfRecord
  auth: Authenticator
  audit: AuditLog
  verifier: StepUpVerifier
  rateLimits: RateLimitStore
  clock: Clock
  limits: PortalLimits
  logger: Logger
}): PortalSessions {
  const { sor, auth, audit, verifier, rateLimits, clock, limits, logger } = deps

  const locked = (scope: 'address' | 'tenant', retryAfter: number): never =>
    fail(ERRORS.signInLocked, { scope, retryAfter }, { headers: { 'Retry-After': String(retryAfter) } })

  async function onRecord(
    kind: ReceiptKind,
    caller: Pick<KeyCaller, 'tenantId' | 'keyId' | 'principalId' | 'principalName'>,
    detail: Record<string, unknown>,
  ): Promise<void> {
    const d = draft({
      receiptId: newId('receipt'),
      tenantId: caller.tenantId,
      createdAt: nowSeconds(clock),
      kind,
      principalId: caller.principalId,
      principalName: caller.principalName,
      keyId: caller.keyId,
      detail: { via: 'portal', ...detail },
    })
    await audit
      .append([d])
      .catch((err) =>
        logger.error({ err, tenantId: caller.tenantId, kind }, 'portal: a receipt could not be written'),
      )
  }

  /** Runs one step of a sign-in; a refusal of it is on record before it is answered. */
  async function refusalOnRecord<T>(caller: KeyCaller, clientIp: string, step: () => Promise<T>): Promise<T> {
    try {
      return await step()
    } catch (err) {
      // A locked address or tenant is not on record at every further attempt: the attempts that
      // locked it are, and a flood past the lock (with a revoked key, say) would otherwise write
      // receipts without end into the tenant's log (found in review).
      if (err instanceof WriteGateError && err.def !== ERRORS.signInLocked) {
        const failure =
          err.def === ERRORS.insufficientScope ? 'agent_key' : String(err.detail?.reason ?? err.def.code)
        await onRecord('PORTAL_SIGN_IN_FAILED', caller, { failure, code: err.def.code, clientIp })
      }
      throw err
    }
  }

  return {
    async signIn({ apiKey, code, clientIp }) {
      const now = clock.nowMs()
      const w = limits.signInWindowSeconds
      // The address bucket comes first: a flood of guesses costs no key lookup.
      const byAddress = await rateLimits.hit(
        `portal:signin:ip:${clientOf(clientIp)}`,
        limits.signInAttemptsPerIp,
        w,
        now,
      )
      const caller = await auth.apiKey(apiKey)
      if (!caller) {
        if (!byAddress.allowed) locked('address', byAddress.retryAfterSeconds)
        return fail(ERRORS.unknownApiKey)
      }
      return refusalOnRecord(caller, clientIp, async () => {
        if (!byAddress.allowed) locked('address', byAddress.retryAfterSeconds)
        if (caller.dead !== null) fail(ERRORS.unknownApiKey, { reason: caller.dead })
        if (caller.scope !== 'admin') fail(ERRORS.insufficientScope)
        const barred = await auth.rosterBar(caller)
        if (barred) fail(ERRORS.keyBarred, { barred })
        const byTenant = await rateLimits.hit(
          `portal:signin:tenant:${caller.tenantId}`,
          limits.signInAttemptsPerTenant,
          w,
          now,
        )
        if (!byTenant.allowed) locked('tenant', byTenant.retryAfterSeconds)
        const proof: StepUpProof = await verifier.check(caller.tenantId, code)

        const token = `${SESSION_PREFIX}${randomBase62(SESSION_RANDOM_LENGTH)}`
        const at = nowSeconds(clock)
        const expiresAt = at + limits.sessionMaxSeconds
        // Sessions end lazily when read; each sign-in also clears the ended ones.
        await sor.stores.portalSessions.purge(at, at - limits.sessionIdleSeconds)
        await sor.transaction(async (tx) => {
          // The code is used up with the session it opens, and the sign-in is on record with both.
          const verification = await verifier.consume(tx, caller.tenantId, proof)
          await tx.portalSessions.create({
            sessionHash: hashSecret(token),
            tenantId: caller.tenantId,
            keyId: caller.keyId,
            principalId: caller.principalId,
            createdAt: at,
            lastSeenAt: at,
            expiresAt,
          })
          await audit.appendWith(tx, [
            draft({
              receiptId: newId('receipt'),
              tenantId: caller.tenantId,
              createdAt: at,
              kind: 'PORTAL_SIGN_IN',
              principalId: caller.principalId,
              principalName: caller.principalName,
              keyId: caller.keyId,
              detail: { via: 'portal', verification, clientIp, expiresAt },
            }),
          ])
        })
        return {
          token,
          session: {
            caller: { ...caller, dead: null },
            csrfToken: csrfTokenOf(token),
            createdAt: at,
            expiresAt,
          },
        }
      })
    },

    resolve,

    async signOut(token) {
      const session = await resolve(token)
      await sor.stores.portalSessions.remove(hashSecret(token))
      if (session) await onRecord('PORTAL_SIGN_OUT', session.caller, {})
    },
  }

  async function resolve(
    token: string | undefined,
    opts: { touch?: boolean } = {},
  ): Promise<PortalSession | null> {
    if (!token?.startsWith(SESSION_PREFIX)) return null
    const secret = token.slice(SESSION_PREFIX.length)
    if (secret.length !== SESSION_RANDOM_LENGTH || !isBase62(secret)) return null
    const hash = hashSecret(token)
    const s = sor.stores
    const found = await s.portalSessions.find(hash)
    if (!found) return null
    const at = nowSeconds(clock)
    const expired = at >= found.expiresAt || at - found.lastSeenAt >= limits.sessionIdleSeconds
    const [key, principal] = expired
      ? [null, null]
      : await Promise.all([
          s.keys.get(found.tenantId, found.keyId),
          s.principals.get(found.tenantId, found.principalId),
        ])
    // The session dies with its key: revoked, or its principal disabled or deleted.
    if (
      !key ||
      key.revokedAt !== null ||
      key.scope !== 'admin' ||
      !principal ||
      !isPrincipalActive(principal)
    ) {
      await s.portalSessions.remove(hash)
      return null
    }
    const caller: KeyCaller = {
      kind: 'key',
      tenantId: found.tenantId,
      keyId: key.id,
      principalId: principal.id,
      principalName: principal.name,
      scope: key.scope,
      dead: null,
    }
    // And while the sponsor's roster names its key or principal (not kept: reinstating brings it back).
    if (await auth.rosterBar(caller)) return null
    if (opts.touch !== false && at - found.lastSeenAt >= TOUCH_EVERY_SECONDS)
      await s.portalSessions.touch(hash, at)
    return {
      caller,
      csrfToken: csrfTokenOf(token),
      createdAt: found.createdAt,
      expiresAt: found.expiresAt,
    }
  }
}
