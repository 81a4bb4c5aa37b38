/** Monthly check quota periods: calendar months in UTC (contract §3). */

/** The last period worked out and the seconds it holds, [from, to): every gated write asks. */
let lastPeriod = { from: 0, to: 0, period: '' }

/** `YYYY-MM` of the month that holds `nowSeconds`. */
export function quotaPeriod(nowSeconds: number): string {
  const last = lastPeriod
  if (nowSeconds >= last.from && nowSeconds < last.to) return last.period
  const d = new Date(nowSeconds * 1000)
  const year = d.getUTCFullYear()
  const month = d.getUTCMonth()
  const period = `${year}-${String(month + 1).padStart(2, '0')}`
  // Date.UTC reads years 0–99 as 1900–1999: such a month is not remembered.
  if (year >= 100)
    lastPeriod = { from: Date.UTC(year, month, 1) / 1000, to: Date.UTC(year, month + 1, 1) / 1000, period }
  return period
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
