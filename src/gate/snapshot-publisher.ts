import type { Clock } from '../core/clock.js'
import { nowSeconds } from '../core/clock.js'
import type { Logger } from '../observability/logger.js'
import { repeatedFailure } from '../observability/repeated-failure.js'
import type { SnapshotSource } from '../store/ports/decision-state.js'
import type { HotStore } from '../store/ports/hot-store.js'
import type { DecisionStateSink } from './decision-state.js'

export interface SnapshotPublisher extends DecisionStateSink {
  /** Publishes every tenant whose hot-store version is behind the system of record. */
  reconcile(): Promise<{ checked: number; published: number }>
  /** Repairs one tenant the hot store has lost (or never had), then publishes it. */
  repair(tenantId: string): Promise<void>
  /** Runs reconcile on a fixed cadence until stopped. */
  start(intervalMs: number): void
  stop(): void
}

/**
 * Control-plane side of snapshots: after every committed decision-affecting change, build
 * the tenant's snapshot from Postgres and publish it before the API answers. A reconciler
 * repairs any divergence left by a crash between the commit and the publish.
 */
export function createSnapshotPublisher(deps: {
  source: SnapshotSource
  hot: HotStore
  clock: Clock
  logger: Logger
  /**
   * Runs before a tenant is republished by repair or the reconciler: re-index its keys and,
   * when the hot store had nothing for it (a restart or data loss), re-seed its quota floors.
   */
  beforeRepublish?: (tenantId: string, wasMissing: boolean) => Promise<void>
}): SnapshotPublisher {
  const { source, hot, clock, logger } = deps
  const prepare = deps.beforeRepublish ?? (async () => {})
  let timer: NodeJS.Timeout | undefined
  const reconcileFailures = repeatedFailure(logger, 'snapshot reconcile')
  let running: Promise<unknown> | undefined

  async function publishTenant(tenantId: string): Promise<boolean> {
    const snap = await source.read(tenantId, nowSeconds(clock))
    if (!snap) return false
    return (await hot.publish(snap)) === 'published'
  }

  const publisher: SnapshotPublisher = {
    async changed(tenantId) {
      await publishTenant(tenantId)
    },
    async reconcile() {
      const all = await source.versions()
      let published = 0
      // One tenant failing (its cluster master away, its rows unreadable) must not leave the
      // tenants after it unpublished: each is tried, and the first failure is reported after.
      let failed: unknown = null
      for (const { tenantId, version } of all) {
        try {
          const hotVersion = await hot.version(tenantId)
          if (hotVersion === null || hotVersion < version) {
            await prepare(tenantId, hotVersion === null)
            if (await publishTenant(tenantId)) published++
          }
        } catch (err) {
          failed ??= err
        }
      }
      if (failed !== null) throw failed
      return { checked: all.length, published }
    },
    async repair(tenantId) {
      await prepare(tenantId, (await hot.version(tenantId)) === null)
      await publishTenant(tenantId)
    },
    start(intervalMs) {
      if (timer) return
      timer = setInterval(() => {
        if (running) return
        running = publisher
          .reconcile()
          .then((r) => {
            reconcileFailures.succeeded()
            if (r.published > 0)
              logger.warn({ published: r.published }, 'reconciler republished stale snapshots')
          })
          .catch((err) => reconcileFailures.failed(err))
          .finally(() => {
            running = undefined
          })
      }, intervalMs)
      timer.unref()
    },
    stop() {
      if (timer) clearInterval(timer)
      timer = undefined
    },
  }
  return publisher
}
