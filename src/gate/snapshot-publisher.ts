import type { Clock } from '../core/clock.js'
import { nowSeconds } from '../core/clock.js'
import type { Logger } from '../observability/logger.js'
import { repeatedFailure } from '../observability/repeated-failure.js'
import type { SnapshotSource } from '../store/ports/decision-state.js'
import type { HotStore } from '../store/ports/hot-store.js'
import type { DecisionStateSink } from './decision-state.js'

/** Publishes raced by other processes before a change is left to the reconciler (503). */
const MAX_PUBLISH_ATTEMPTS = 5

export interface SnapshotPublisher extends DecisionStateSink {
  /** Publishes every tenant whose hot-store version is not the system of record's. */
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
    if ((await hot.publish(snap)) === 'published') return true
    // The hot store holds this version or a newer one: a later change published first, which
    // carries this one. Unless the newer one is ahead of the database itself, which then was
    // restored from a backup (or failed over to a replica that lagged) while Redis kept its
    // data: a version the database never committed, and every change would be refused as
    // older, the kill switch included, while the API answered 2xx (found in review).
    // Another process may replace the same held version first, with a read older than this
    // one's (found in review): tried again until the hot store holds the database's version or
    // a later one, else the change is not acknowledged (publish_pending).
    for (let attempt = 0; attempt < MAX_PUBLISH_ATTEMPTS; attempt++) {
      const held = await hot.version(tenantId)
      // Read again after `held`: a version published legitimately is committed before it.
      const fresh = await source.read(tenantId, nowSeconds(clock))
      if (!fresh) return false
      // Held a version that carries this change (its own or a later one) and that the database
      // has: done. Requiring the database's latest instead let a burst of concurrent changes
      // each lose the race five times and answer publish_pending for a change in effect.
      if (held !== null && held >= snap.version && held <= fresh.version) return false
      if (held === null || held < fresh.version) {
        if ((await hot.publish(fresh)) === 'published') return true
        continue
      }
      logger.warn(
        { tenantId, hotVersion: held, version: fresh.version },
        'the hot store was ahead of the database (restored?): its snapshot is replaced',
      )
      // Only over that very version: a change published meanwhile is not overwritten.
      if ((await hot.publish(fresh, held)) === 'published') return true
    }
    throw new Error(`the hot store's snapshot of ${tenantId} could not be brought to the database's`)
  }

  const publisher: SnapshotPublisher = {
    async changed(tenantId) {
      // The hot store lost this tenant (a restart without persistence): its keys and quota
      // counters come back before the new snapshot lets commits land, as in repair; otherwise
      // the counters restart at 0 and a key spends its month's quota again (found in review).
      if ((await hot.version(tenantId)) === null) await prepare(tenantId, true)
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
          // Ahead counts too: the database was restored behind it (see publishTenant).
          if (hotVersion === null || hotVersion !== version) {
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
