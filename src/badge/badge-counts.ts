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
  return async function countFor(tenantId: string, nowMs: number): Promise<number> {
    const kept = counts.get(tenantId)
    if (kept && nowMs - kept.atMs < deps.ttlMs) return kept.count
    const count = await deps.load(tenantId, nowMs)
    counts.delete(tenantId)
    counts.set(tenantId, { count, atMs: nowMs })
    if (counts.size > deps.max) counts.delete(counts.keys().next().value as string)
    return count
  }
}
