/** Identity records as the domain sees them (timestamps in epoch seconds). */

export type KeyScope = 'admin' | 'agent'

export interface Tenant {
  id: string
  name: string
  createdAt: number
  /** Decision-state version; see docs/architecture.md "Snapshots and versions". */
  version: number
}

export interface Principal {
  id: string
  tenantId: string
  name: string
  disabled: boolean
  createdAt: number
  deletedAt: number | null
}

export interface ApiKey {
  id: string
  tenantId: string
  principalId: string
  scope: KeyScope
  createdAt: number
  revokedAt: number | null
}

export function isPrincipalLive(p: Pick<Principal, 'deletedAt'>): boolean {
  return p.deletedAt === null
}

export function isPrincipalActive(p: Pick<Principal, 'deletedAt' | 'disabled'>): boolean {
  return p.deletedAt === null && !p.disabled
}

/** A key is dead when it was revoked or its principal is disabled or tombstoned (contract §2 "Dead keys"). */
export function isKeyDead(
  key: Pick<ApiKey, 'revokedAt'>,
  principal: Pick<Principal, 'deletedAt' | 'disabled'>,
): boolean {
  return key.revokedAt !== null || !isPrincipalActive(principal)
}
