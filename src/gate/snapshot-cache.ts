import { CompiledSnapshot } from '../core/snapshot.js'
import type { HotStore } from '../store/ports/hot-store.js'

/**
 * Compiled snapshots per tenant, in process. Invalidation (pub/sub) only makes refreshes
 * prompt; correctness comes from the commit's version check, never from this cache.
 */
export interface SnapshotCache {
  get(tenantId: string): Promise<CompiledSnapshot | null>
  /**
   * Drops the entry unless it is of `version`, the hot store's current one (or unconditionally).
   * Older or newer: a hot store replaced after a database restore moves back.
   */
  invalidate(tenantId: string, version?: number): void
  /** Versions currently held, for metrics. */
  entries(): { tenantId: string; version: number; loadedAtMs: number }[]
  close(): void
}

export function createSnapshotCache(deps: {
  hot: HotStore
  nowMs: () => number
  /** Asked when the hot store has no snapshot (the control plane builds and publishes one). */
  onMissing?: (tenantId: string) => Promise<void>
}): SnapshotCache {
  const cache = new Map<string, { snap: CompiledSnapshot; loadedAtMs: number }>()
  const loading = new Map<string, Promise<CompiledSnapshot | null>>()
  /** One subscription per tenant held (or being loaded): a proxy has one, a control plane one per tenant it serves. */
  const subscriptions = new Map<string, () => void>()
  const follow = (tenantId: string) => {
    if (subscriptions.has(tenantId)) return
    subscriptions.set(
      tenantId,
      deps.hot.subscribe(tenantId, (version) => {
        const c = cache.get(tenantId)
        if (c && c.snap.version !== version) cache.delete(tenantId)
      }),
    )
  }

  async function load(tenantId: string): Promise<CompiledSnapshot | null> {
    // Before the read: a bump that lands while it is under way is heard.
    follow(tenantId)
    let raw = await deps.hot.snapshot(tenantId)
    if (!raw && deps.onMissing) {
      await deps.onMissing(tenantId)
      raw = await deps.hot.snapshot(tenantId)
    }
    if (!raw) return null
    const c = cache.get(tenantId)
    const snap = new CompiledSnapshot(raw, c?.snap)
    if (!c || c.snap.version < snap.version) cache.set(tenantId, { snap, loadedAtMs: deps.nowMs() })
    return snap
  }

  return {
    async get(tenantId) {
      const c = cache.get(tenantId)
      if (c) return c.snap
      let p = loading.get(tenantId)
      if (!p) {
        p = load(tenantId).finally(() => loading.delete(tenantId))
        loading.set(tenantId, p)
      }
      return p
    },
    invalidate(tenantId, version) {
      const c = cache.get(tenantId)
      if (c && (version === undefined || c.snap.version !== version)) cache.delete(tenantId)
    },
    entries() {
      return [...cache.entries()].map(([tenantId, c]) => ({
        tenantId,
        version: c.snap.version,
        loadedAtMs: c.loadedAtMs,
      }))
    },
    close() {
      for (const off of subscriptions.values()) off()
      subscriptions.clear()
      cache.clear()
    },
  }
}
