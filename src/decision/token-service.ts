import { openAllowToken } from '../core/allow-token.js'
import type { Clock } from '../core/clock.js'
import { nowSeconds } from '../core/clock.js'
import { ERRORS, fail } from '../core/errors.js'
import type { Gate } from '../gate/gate.js'
import type { KeyCaller } from '../identity/caller.js'
import type { Keyring } from '../security/keyring.js'
import type { SystemOfRecord } from '../store/ports/index.js'

export type TokenVerdict =
  | {
      valid: true
      tenantId: string
      principalId: string
      keyId: string
      verb: string
      target: string | null
      expiresAt: number
    }
  | { valid: false; reason: 'malformed' | 'bad_signature' | 'expired' | 'revoked' | 'wrong_tenant' | 'used' }

export interface TokenService {
  verify(caller: KeyCaller, token: string): Promise<TokenVerdict>
}

/**
 * POST /v1/tokens/verify. Revocation is judged against the current snapshot, so a token
 * issued before a revoke verifies as `revoked` once the revoke has returned, and stays so after
 * a reinstate (it was outstanding when its key was revoked).
 */
export function createTokenService(deps: {
  keyring: Keyring
  clock: Clock
  gate: Gate
  sor: SystemOfRecord
}): TokenService {
  return {
    async verify(caller, token) {
      const opened = openAllowToken(deps.keyring.tokenSigning, token)
      if (!opened.ok) return { valid: false, reason: opened.reason }
      const c = opened.claims
      if (c.tid !== caller.tenantId) return { valid: false, reason: 'wrong_tenant' }
      if (c.exp <= nowSeconds(deps.clock)) return { valid: false, reason: 'expired' }
      // Judged under a snapshot the hot store confirms is current, so a token verifies as
      // revoked on every replica once the revoke has returned.
      const standing = await deps.gate.standing(c.tid, c.kid, c.iat)
      if (standing.kind === 'unavailable') fail(ERRORS.gateUnavailable)
      const revoked = standing.kind === 'barred'
      if (revoked) return { valid: false, reason: 'revoked' }
      if (c.bind) {
        const lease = await deps.sor.stores.leases.get(c.tid, c.jti)
        if (lease?.usedAt != null) return { valid: false, reason: 'used' }
      }
      return {
        valid: true,
        tenantId: c.tid,
        principalId: c.pid,
        keyId: c.kid,
        verb: c.verb,
        target: c.tgt,
        expiresAt: c.exp,
      }
    },
  }
}
