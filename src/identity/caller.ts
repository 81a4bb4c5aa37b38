import type { KeyScope } from '../core/identity.js'

/** Why a key can no longer act (contract §2 "Dead keys"). */
export type DeadKeyReason = 'key_revoked' | 'principal_disabled' | 'principal_deleted'

/** Who is calling, once the bearer credential is resolved. */
export type Caller =
  | {
      kind: 'key'
      tenantId: string
      keyId: string
      principalId: string
      principalName: string
      scope: KeyScope
      /** Non-null for a dead key: only POST /v1/check still answers (DENY, on record). */
      dead: DeadKeyReason | null
    }
  | { kind: 'sponsor'; tenantId: string }

export type KeyCaller = Extract<Caller, { kind: 'key' }>
export type SponsorCaller = Extract<Caller, { kind: 'sponsor' }>

/** Receipt `detail.actor`: who made an administrative change. */
export function actorOf(caller: Caller): Record<string, string> {
  return caller.kind === 'key'
    ? { type: 'key', keyId: caller.keyId, principalId: caller.principalId }
    : { type: 'sponsor' }
}
