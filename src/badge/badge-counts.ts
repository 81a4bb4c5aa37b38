/**
 * The badge's count per tenant, kept for a while (found in review: a published badge URL ran a
 * 30-day count over the shared audit log on every view, about 1.4 s on two million receipts,
 * 120 times a minute per token). Bounded: the oldest entry goes first.
 */
export function createBadgeCounts(deps: {
  load: (tenantId: string, nowMs: number) => Promise<number>
  ttlMs: number
  max: number
}) {
  const counts = new Map<string, { count: number; atMs: number }>()
  /** Views that come while a count is read wait for that one read, not a read each. */
  const loading = new Map<string, Promise<number>>()
  return async function countFor(tenantId: string, nowMs: number): Promise<number> {
    const kept = counts.get(tenantId)
    if (kept && nowMs - kept.atMs < deps.ttlMs) return kept.count
    let pending = loading.get(tenantId)
    if (!pending) {
      pending = deps.load(tenantId, nowMs).finally(() => loading.delete(tenantId))
      loading.set(tenantId, pending)
    }
    const count = await pending
    counts.delete(tenantId)
    counts.set(tenantId, { count, atMs: nowMs })
    if (counts.size > deps.max) counts.delete(counts.keys().next().value as string)
    return count
  }
}
