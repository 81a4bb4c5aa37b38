/** A public badge token, as stored: only its SHA-256 is kept. */
export interface BadgeTokenRecord {
  id: string
  tenantId: string
  tokenHash: string
  label: string
  createdAt: number
  revokedAt: number | null
}

export interface BadgeTokenStore {
  create(record: Omit<BadgeTokenRecord, 'revokedAt'>): Promise<void>
  /** The live (not revoked) token with this hash, or null. */
  findLive(tokenHash: string): Promise<BadgeTokenRecord | null>
  /** Revokes a live token of the tenant; false when there is none (another tenant's included). */
  revoke(tenantId: string, tokenHash: string, at: number): Promise<boolean>
}
