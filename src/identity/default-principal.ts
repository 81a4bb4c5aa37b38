import type { Principal } from '../core/identity.js'
import { newId } from '../core/ids.js'
import type { Stores } from '../store/ports/index.js'

export const DEFAULT_PRINCIPAL_NAME = 'default'

/**
 * The tenant's `default` principal (the live one of that name), created on demand.
 * Keys issued without `principal_id` belong to it. Callers hold the tenant lock.
 */
export async function ensureDefaultPrincipal(
  stores: Stores,
  tenantId: string,
  at: number,
): Promise<{ principal: Principal; created: boolean }> {
  const existing = await stores.principals.findLiveByName(tenantId, DEFAULT_PRINCIPAL_NAME)
  if (existing) return { principal: existing, created: false }
  const principal: Principal = {
    id: newId('principal'),
    tenantId,
    name: DEFAULT_PRINCIPAL_NAME,
    disabled: false,
    createdAt: at,
    deletedAt: null,
  }
  await stores.principals.create(principal)
  return { principal, created: true }
}
