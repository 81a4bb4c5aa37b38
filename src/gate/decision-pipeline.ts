import type { AuditLog } from '../audit/audit-log.js'
import type { Clock } from '../core/clock.js'
import type { Metrics } from '../observability/metrics.js'
import type { HotStore } from '../store/ports/hot-store.js'
import type { SystemOfRecord } from '../store/ports/index.js'
import { createGate, type Gate } from './gate.js'
import { createGatedWrites, type GatedWrites } from './gated-write.js'
import { createSnapshotCache, type SnapshotCache } from './snapshot-cache.js'

/** The snapshot cache and the gate over it, reporting to the process's metrics: the same in every process. */
export function createDecisionPipeline(deps: {
  hot: HotStore
  clock: Clock
  metrics: Metrics
  quotaLimit: number
  /** The control plane builds and publishes a snapshot the hot store lacks; a proxy cannot. */
  onMissing?: (tenantId: string) => Promise<void>
  /** The control plane's Postgres chain, for gated writes that answer with their receipt's seq. */
  auditChain?: { sor: SystemOfRecord; log: AuditLog }
}): { snapshots: SnapshotCache; gate: Gate; writes: GatedWrites } {
  const { hot, clock, metrics } = deps
  const snapshots = createSnapshotCache({
    hot,
    nowMs: () => clock.nowMs(),
    ...(deps.onMissing ? { onMissing: deps.onMissing } : {}),
  })
  metrics.watchSnapshots(
    () => snapshots.entries(),
    () => clock.nowMs(),
  )
  const gate = createGate({ hot, snapshots, clock, quotaLimit: deps.quotaLimit, events: metrics.gateEvents })
  return {
    snapshots,
    gate,
    writes: createGatedWrites({ gate, clock, ...(deps.auditChain ? { auditChain: deps.auditChain } : {}) }),
  }
}
