/** Monthly check quota periods: calendar months in UTC (contract §3). */

/** `YYYY-MM` of the month that holds `nowSeconds`. */
export function quotaPeriod(nowSeconds: number): string {
  const d = new Date(nowSeconds * 1000)
  return `${d.getUTCFullYear()}-${String(d.getUTCMonth() + 1).padStart(2, '0')}`
}

/** Epoch seconds of 00:00 UTC on the first of the next month. */
export function quotaResetsAt(nowSeconds: number): number {
  const d = new Date(nowSeconds * 1000)
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1) / 1000
}

export interface QuotaStanding {
  limit: number
  used: number
  remaining: number
  resetsAt: number
}

export function quotaStanding(limit: number, used: number, nowSeconds: number): QuotaStanding {
  return { limit, used, remaining: Math.max(0, limit - used), resetsAt: quotaResetsAt(nowSeconds) }
}
