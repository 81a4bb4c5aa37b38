import type { KeyObject } from 'node:crypto'
import { verifyStoredLog } from '../audit/log-verifier.js'
import { type Clock, nowSeconds } from '../core/clock.js'
import type { CheckpointStore } from '../store/ports/checkpoints.js'
import type { Stores } from '../store/ports/index.js'
import type { ReceiptReader } from '../store/ports/receipt-reader.js'
import type { OverviewData } from './pages/overview.js'

const DAY = 86_400
export const STATS_WINDOW_SECONDS = DAY
export const STATS_CAP = 5000

/** Everything the overview shows, read from the log and the stores (nothing cached). */
export async function overviewData(
  deps: {
    stores: Stores
    reader: ReceiptReader
    checkpoints: CheckpointStore
    publicKey: KeyObject
    clock: Clock
  },
  tenantId: string,
  /** Aborts the whole-log verification the overview runs (its client gone). */
  signal?: AbortSignal,
): Promise<OverviewData> {
  const now = nowSeconds(deps.clock)
  const counts = await deps.reader.decisionCounts(tenantId, now - STATS_WINDOW_SECONDS, STATS_CAP)
  const byDecision = {
    ALLOW: counts.byDecision.ALLOW ?? 0,
    DENY: counts.byDecision.DENY ?? 0,
    STEP_UP: counts.byDecision.STEP_UP ?? 0,
    REVOKE: counts.byDecision.REVOKE ?? 0,
  }
  // Writes gated since the start of each of the last 30 UTC days; a day's count is the difference.
  const today = Math.floor(now / DAY) * DAY
  const starts = Array.from({ length: 30 }, (_, i) => today - (29 - i) * DAY)
  const since: number[] = []
  for (const s of starts) since.push(await deps.reader.gatedWrites(tenantId, s))
  const gatedByDay = starts.map((s, i) => ({
    day: new Date(s * 1000).toISOString().slice(5, 10),
    count: (since[i] ?? 0) - (since[i + 1] ?? 0),
  }))
  const latest = await deps.checkpoints.latest(tenantId)
  const v = await verifyStoredLog(
    { reader: deps.reader, checkpoints: deps.checkpoints, publicKey: deps.publicKey },
    tenantId,
    {},
    signal,
  )
  const pending = await deps.stores.actions.list(tenantId, now, 1000)
  return {
    byDecision,
    truncated: counts.truncated,
    gatedByDay,
    checkpoint: latest ? { seq: latest.seq, hash: latest.hash, at: latest.at } : null,
    verification: {
      valid: v.valid,
      checked: v.checked,
      headSeq: v.headSeq,
      ...(v.firstInvalidSeq !== undefined ? { firstInvalidSeq: v.firstInvalidSeq } : {}),
      ...(v.reason !== undefined ? { reason: v.reason } : {}),
    },
    pendingApprovals: pending.length,
  }
}
