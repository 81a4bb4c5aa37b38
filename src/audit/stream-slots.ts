/**
 * Open receipt streams a tenant, and a control-plane process, may hold: the API's and the
 * portal's Live page's together. Each holds a page of receipts while its client does not read
 * (≈ 0.5–0.9 MB) and asks the database at every keepalive and commit; unbounded, one admin
 * key's idle connections ran a shared control plane out of memory (found in review).
 */
export const MAX_STREAMS_PER_TENANT = 16
export const MAX_STREAMS = 256

export interface StreamSlots {
  /** A slot for one more of the tenant's streams, to release when it ends; or the limit it met. */
  take(tenantId: string): { release(): void } | { limit: number }
  /** Slots held (tests). */
  held(tenantId?: string): number
}

export function createStreamSlots(
  limits: { perTenant: number; total: number } = { perTenant: MAX_STREAMS_PER_TENANT, total: MAX_STREAMS },
): StreamSlots {
  const byTenant = new Map<string, number>()
  let total = 0
  return {
    take(tenantId) {
      const mine = byTenant.get(tenantId) ?? 0
      if (mine >= limits.perTenant) return { limit: limits.perTenant }
      if (total >= limits.total) return { limit: limits.total }
      byTenant.set(tenantId, mine + 1)
      total++
      let released = false
      return {
        release() {
          if (released) return
          released = true
          total--
          const left = (byTenant.get(tenantId) ?? 1) - 1
          if (left > 0) byTenant.set(tenantId, left)
          else byTenant.delete(tenantId)
        },
      }
    },
    held: (tenantId) => (tenantId === undefined ? total : (byTenant.get(tenantId) ?? 0)),
  }
}
