import type { ApiKey, KeyScope, Principal, Tenant } from '../../core/identity.js'

export interface TenantStore {
  create(t: { id: string; name: string; createdAt: number; sponsorHash: string }): Promise<void>
  get(id: string): Promise<Tenant | null>
  findBySponsorHash(hash: string): Promise<{ tenant: Tenant; sponsorHash: string } | null>
  /** Replaces the sponsor token's hash only while it is still `from`; false when another rotation came first. */
  replaceSponsorHash(tenantId: string, from: string, to: string): Promise<boolean>
  /** Records the email as the owner of a tenant; false when the email already owns one. */
  claimEmail(email: string, tenantId: string, at: number): Promise<boolean>
  tenantOfEmail(email: string): Promise<string | null>
  /**
   * Advances the decision-state version and returns it. Takes the tenant row lock, so
   * concurrent decision-affecting changes of one tenant are serialised.
   */
  bumpVersion(tenantId: string): Promise<number>
}

export interface NewPrincipal {
  id: string
  tenantId: string
  name: string
  disabled: boolean
  createdAt: number
}

export interface PrincipalWithKeys extends Principal {
  keyCount: number
}

export interface PrincipalStore {
  /** Inserts; returns false when a live principal of the tenant has the name (case-insensitive). */
  create(p: NewPrincipal): Promise<boolean>
  /** Any principal of the tenant by id, tombstoned or not. */
  get(tenantId: string, id: string): Promise<Principal | null>
  /** Locks the row for the rest of the transaction. */
  getForUpdate(tenantId: string, id: string): Promise<Principal | null>
  findLiveByName(tenantId: string, name: string): Promise<Principal | null>
  list(tenantId: string, includeDeleted: boolean): Promise<PrincipalWithKeys[]>
  keyCount(principalId: string): Promise<number>
  /** Returns false when the new name collides with another live principal. Caller holds the tenant lock. */
  rename(tenantId: string, id: string, name: string): Promise<boolean>
  /** When it was disabled and enabled is remembered: what the principal held then stays revoked. */
  setDisabled(tenantId: string, id: string, disabled: boolean, at: number): Promise<void>
  tombstone(tenantId: string, id: string, at: number): Promise<void>
}

export interface NewApiKey {
  id: string
  tenantId: string
  principalId: string
  secretHash: string
  scope: KeyScope
  email: string
  createdAt: number
}

/** An API key with the state of its principal, as authentication needs it. */
export interface ResolvedKey {
  key: ApiKey
  principal: Principal
  /** The stored hash, so the caller can compare it in constant time. */
  secretHash: string
}

export interface KeyStore {
  create(k: NewApiKey): Promise<void>
  /** One round trip: the key by secret hash, joined with its principal. */
  resolve(secretHash: string): Promise<ResolvedKey | null>
  get(tenantId: string, id: string): Promise<ApiKey | null>
  liveKeysOfPrincipal(tenantId: string, principalId: string): Promise<ApiKey[]>
  /** Every key's hash with its tenant and id, to rebuild the proxies' key index. */
  indexEntries(tenantId?: string): Promise<{ secretHash: string; tenantId: string; keyId: string }[]>
  /** Revokes the given live keys; returns the ids actually revoked (already-revoked ones are skipped). */
  revoke(tenantId: string, keyIds: string[], at: number, reason: string | null): Promise<string[]>
}

export interface Invite {
  tenantId: string
  createdAt: number
  expiresAt: number
  /** The key that made it; null for an invite made before issuers were kept. */
  issuerKeyId: string | null
}

export interface InviteStore {
  /** Replaces the tenant's invite: the previous code stops working. */
  rotate(
    tenantId: string,
    codeHash: string,
    createdAt: number,
    expiresAt: number,
    issuerKeyId: string,
  ): Promise<void>
  findByHash(codeHash: string): Promise<Invite | null>
}

export interface BackupCodeRecord {
  index: number
  salt: string
  hash: string
  usedAt: number | null
}

export interface TotpStore {
  /**
   * Sets the tenant's authenticator and its backup codes, only while the current one is
   * `replaces` (null: none yet): false, with nothing changed, when another enrolment came first.
   * A re-enrolment also forgets the last step used and empties the bucket of wrong codes.
   */
  enrol(
    tenantId: string,
    secretEnc: string,
    at: number,
    codes: Omit<BackupCodeRecord, 'usedAt'>[],
    replaces: string | null,
  ): Promise<boolean>
  secret(tenantId: string): Promise<{ secretEnc: string; lastUsedStep: number | null } | null>
  /**
   * The `limit` most recent enrolments, newest first: what start-up tries to
   * open with the configured master key.
   */
  newestSecrets(limit: number): Promise<{ tenantId: string; secretEnc: string }[]>
  /**
   * Counts one code about to be checked as wrong, before it is checked (parallel guesses cannot
   * outrun the limit), in a bucket that drains `drainPerSecond` with time but not once it is
   * past `limit` (locked); returns the level including it, or null when the tenant has no
   * authenticator.
   */
  countCodeTried(tenantId: string, at: number, limit: number, drainPerSecond: number): Promise<number | null>
  /**
   * A right code is used: its count is taken back, unless the count is past `limit` (the lock
   * engaged meanwhile): false, with nothing changed.
   */
  uncountCodeTried(tenantId: string, limit: number): Promise<boolean>
  /**
   * RFC 6238 replay rule: succeeds only when `step` is above every step accepted before, and
   * the authenticator is still `enrolment` (the sealed secret the code was checked against).
   */
  acceptStep(tenantId: string, step: number, enrolment: string): Promise<boolean>
  unusedBackupCodes(tenantId: string): Promise<BackupCodeRecord[]>
  /** Marks a backup code used; false when it was used concurrently, or the authenticator is no longer `enrolment`. */
  useBackupCode(tenantId: string, index: number, at: number, enrolment: string): Promise<boolean>
}
