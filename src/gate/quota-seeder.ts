import type { Clock } from '../core/clock.js'
import { nowSeconds } from '../core/clock.js'
import { quotaPeriod } from '../core/quota.js'
import type { ReceiptStore } from '../store/ports/audit.js'
import type { HotStore } from '../store/ports/hot-store.js'

/**
 * After a restart (memory hot store) or a Redis data loss, quota counters would start at 0
 * and let keys overshoot. Every counted check has a CHECK receipt, so the month's receipts
 * are a floor for each counter; counters that exist are left alone.
 */
export async function seedQuotaCounters(
  deps: { receipts: ReceiptStore; hot: HotStore; clock: Clock },
  /** Only this tenant's counters (after its hot state was lost); all tenants when absent. */
  tenantId?: string,
): Promise<number> {
  const now = nowSeconds(deps.clock)
  const d = new Date(now * 1000)
  const monthStart = Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1) / 1000
  const period = quotaPeriod(now)
  const counts = await deps.receipts.checkCountsSince(monthStart, tenantId)
  for (const c of counts) await deps.hot.seedQuota(c.tenantId, c.keyId, period, c.count)
  return counts.length
}
