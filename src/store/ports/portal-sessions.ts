/** A portal session as stored: only the SHA-256 of its cookie value is kept. Times in seconds. */
export interface PortalSessionRecord {
  sessionHash: string
  tenantId: string
  keyId: string
  principalId: string
  createdAt: number
  lastSeenAt: number
  /** The absolute expiry: no activity extends a session past it. */
  expiresAt: number
}

export interface PortalSessionStore {
  create(record: PortalSessionRecord): Promise<void>
  find(sessionHash: string): Promise<PortalSessionRecord | null>
  /** Moves last-seen forward (never back); idle expiry counts from it. */
  touch(sessionHash: string, at: number): Promise<void>
  /** False when there was no such session. */
  remove(sessionHash: string): Promise<boolean>
  /** Deletes sessions past their absolute expiry or idle since before `idleBefore`; returns how many. */
  purge(now: number, idleBefore: number): Promise<number>
  /** Deletes every session of a tenant (its step-up authenticator re-enrolled); returns how many. */
  removeTenant(tenantId: string): Promise<number>
}
