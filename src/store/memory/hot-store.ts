import type { QuotaCounter } from '../ports/hot-store.js'

/** In-process hot state for the single-process default. */
export function createMemoryHotStore(): QuotaCounter {
  const quota = new Map<string, number>()
  return {
    async used(tenantId, keyId, period) {
      return quota.get(`${tenantId}:${keyId}:${period}`) ?? 0
    },
  }
}
