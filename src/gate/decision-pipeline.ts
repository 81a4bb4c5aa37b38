import type { Clock } from '../core/clock.js'
import type { Metrics } from '../observability/metrics.js'
import type { HotStore } from '../store/ports/hot-store.js'
import { createGate, type Gate } from './gate.js'
import { createSnapshotCache, type SnapshotCache } from './snapshot-cache.js'

/** The snapshot cache and the gate over it, reporting to the process's metrics: the same in every process. */
export function createDecisionPipeline(deps: {
  hot: HotStore
  clock: Clock
  metrics: Metrics
  quotaLimit: number
  /** The control plane builds and publishes a snapshot the hot store lacks; a proxy cannot. */
  onMissing?: (tenantId: string) => Promise<void>
}): { snapshots: SnapshotCache; gate: Gate } {
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
  return { snapshots, gate }
}
