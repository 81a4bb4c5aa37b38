import { classifyCredential } from '../core/credentials.js'
import { digestsEqual, hashSecret } from '../core/secret-hash.js'
import type { Stores } from '../store/ports/index.js'
import type { DeadKeyReason, KeyCaller, SponsorCaller } from './caller.js'

export interface Authenticator {
  /** A live or dead API key, or null for anything else (sponsor and badge tokens included). */
  apiKey(bearer: string | undefined): Promise<KeyCaller | null>
  /**
   * Who a key is (tenant, key, principal, scope), for POST /v1/check alone: every answer there is
   * decided under the tenant's current snapshot, which judges the key's standing itself
   * (revoked, a disabled or deleted principal: DENY on record). Those facts never change for a
   * key, so they are kept in a bounded cache and a check costs no Postgres lookup; `dead` is
   * left null here and never consulted, and `principalName` is as first seen (receipts take the
   * name from the snapshot).
   */
  keyIdentity(bearer: string | undefined): Promise<KeyCaller | null>
  /** The tenant whose sponsor token this is, or null. */
  sponsor(bearer: string | undefined): Promise<SponsorCaller | null>
  /**
   * Why the sponsor's roster bars this live key (`POST /v1/revoke` named it or its principal),
   * or null. Such a key may still check (DENY, on record) but does no admin work: otherwise a
   * revoked admin key could mint an unrevoked one through an invite, or open policy for every
   * other agent. Read from the system of record, where the roster is written before it is
   * published: so it holds the moment the revoke is answered, needs no Redis, and is not hidden
   * by a tenant-wide kill switch (which bars checks, not admins: they may fix policy before the
   * sponsor lifts it).
   */
  /** Read through `within` when given (the caller's transaction). */
  rosterBar(
    caller: Pick<KeyCaller, 'tenantId' | 'keyId' | 'principalId'>,
    within?: Stores,
  ): Promise<RosterBar | null>
}

export type RosterBar = 'sponsor_revoked_key' | 'sponsor_revoked_principal'

/** Extracts the credential of `Authorization: Bearer <credential>`. */
export function bearerOf(header: string | undefined): string | undefined {
  if (!header) return undefined
  const m = /^Bearer[ ]+(\S+)\s*$/i.exec(header)
  return m?.[1]
}

/** Key identities kept for POST /v1/check; past it the oldest are dropped. */
export const KEY_IDENTITY_CACHE_SIZE = 10_000

export function createAuthenticator(deps: { stores: Stores; identityCacheSize?: number }): Authenticator {
  const { stores } = deps
  const cacheSize = deps.identityCacheSize ?? KEY_IDENTITY_CACHE_SIZE
  // By the secret's hash, never the secret; only keys that resolved are kept.
  const identities = new Map<string, KeyCaller>()

  /** The key whose secret hashes to `hash`, live or dead, or null. */
  async function keyByHash(hash: string): Promise<KeyCaller | null> {
    const found = await stores.keys.resolve(hash)
    if (!found || !digestsEqual(found.secretHash, hash)) return null
    const { key, principal } = found
    let dead: DeadKeyReason | null = null
    if (key.revokedAt !== null) dead = 'key_revoked'
    else if (principal.deletedAt !== null) dead = 'principal_deleted'
    else if (principal.disabled) dead = 'principal_disabled'
    return {
      kind: 'key',
      tenantId: key.tenantId,
      keyId: key.id,
      principalId: principal.id,
      principalName: principal.name,
      scope: key.scope,
      dead,
    }
  }

  const auth: Authenticator = {
    async keyIdentity(bearer) {
      if (!bearer || classifyCredential(bearer) !== 'apiKey') return null
      const hash = hashSecret(bearer)
      const known = identities.get(hash)
      if (known) return known
      const caller = await keyByHash(hash)
      if (!caller) return null
      const identity: KeyCaller = { ...caller, dead: null }
      if (identities.size >= cacheSize) identities.delete(identities.keys().next().value as string)
      identities.set(hash, identity)
      return identity
    },
    async apiKey(bearer) {
      if (!bearer || classifyCredential(bearer) !== 'apiKey') return null
      return keyByHash(hashSecret(bearer))
    },
    async sponsor(bearer) {
      if (!bearer || classifyCredential(bearer) !== 'sponsor') return null
      const hash = hashSecret(bearer)
      const found = await stores.tenants.findBySponsorHash(hash)
      if (!found || !digestsEqual(found.sponsorHash, hash)) return null
      return { kind: 'sponsor', tenantId: found.tenant.id }
    },
    async rosterBar(caller, within) {
      const entries = await (within ?? stores).roster.list(caller.tenantId)
      if (entries.some((e) => e.target.kind === 'key' && e.target.id === caller.keyId))
        return 'sponsor_revoked_key'
      if (entries.some((e) => e.target.kind === 'principal' && e.target.id === caller.principalId))
        return 'sponsor_revoked_principal'
      return null
    },
  }
  return auth
}
