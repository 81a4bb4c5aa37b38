import t from 'tap'
import { systemClock } from '../../src/core/clock.js'
import { createSnapshotPublisher } from '../../src/gate/snapshot-publisher.js'
import { createLogger } from '../../src/observability/logger.js'
import { createMemoryHotStore } from '../../src/store/memory/hot-store.js'
import { emptySnapshot } from '../helpers/snapshots.js'

t.test("reconcile: one tenant's failure does not leave the tenants after it unpublished", async (t) => {
  const memory = createMemoryHotStore()
  // The first tenant's hot state cannot be read (its cluster master is away, say).
  const hot = {
    ...memory,
    version: (tenantId: string) =>
      tenantId === 'ten_broken' ? Promise.reject(new Error('CLUSTERDOWN')) : memory.version(tenantId),
  }
  const publisher = createSnapshotPublisher({
    source: {
      versions: async () => [
        { tenantId: 'ten_broken', version: 3 },
        { tenantId: 'ten_fine', version: 3 },
      ],
      read: async (tenantId: string) => emptySnapshot(tenantId, 3, 1),
    },
    hot,
    clock: systemClock,
    logger: createLogger('silent'),
  })
  await t.rejects(publisher.reconcile(), /CLUSTERDOWN/, 'the pass reports the failure')
  t.equal(await memory.version('ten_fine'), 3, 'the tenant after it was published')
})

/** A database whose tenant is at `version`, as the publisher reads it. */
function sourceAt(tenantId: string, at: { version: number }) {
  return {
    versions: async () => [{ tenantId, version: at.version }],
    read: async (id: string) => (id === tenantId ? emptySnapshot(tenantId, at.version, 1) : null),
  }
}

t.test(
  'a hot store ahead of a restored database is replaced, by a change and by the reconciler (found in review)',
  async (t) => {
    const hot = createMemoryHotStore()
    // Redis kept version 91; the database was restored to 88, and its next change is 89.
    await hot.publish(emptySnapshot('ten_a', 91, 1))
    const at = { version: 89 }
    const publisher = createSnapshotPublisher({
      source: sourceAt('ten_a', at),
      hot,
      clock: systemClock,
      logger: createLogger('silent'),
    })
    await publisher.changed('ten_a')
    t.equal(await hot.version('ten_a'), 89, "the change is published, not refused as older than Redis's 91")

    await hot.publish(emptySnapshot('ten_a', 95, 1), 89)
    t.same(await publisher.reconcile(), { checked: 1, published: 1 })
    t.equal(await hot.version('ten_a'), 89, 'the reconciler too puts the database back')
  },
)

t.test('a later change published first is kept: the hot store is not ahead of the database', async (t) => {
  const hot = createMemoryHotStore()
  // This change read version 3; by the time it publishes, 4 is committed and published.
  const reads = [3, 4]
  const publisher = createSnapshotPublisher({
    source: {
      versions: async () => [{ tenantId: 'ten_a', version: 4 }],
      read: async () => emptySnapshot('ten_a', reads.shift() ?? 4, 1),
    },
    hot,
    clock: systemClock,
    logger: createLogger('silent'),
  })
  await hot.publish(emptySnapshot('ten_a', 4, 1))
  await publisher.changed('ten_a')
  t.equal(await hot.version('ten_a'), 4, 'not moved back to the 3 this change read')
  t.same(reads, [], 'the database was read again to tell')
})

t.test(
  'a change after the hot store lost the tenant re-seeds its quota counters first (found in review)',
  async (t) => {
    const hot = createMemoryHotStore()
    const prepared: [string, boolean, number | null][] = []
    const publisher = createSnapshotPublisher({
      source: sourceAt('ten_a', { version: 7 }),
      hot,
      clock: systemClock,
      logger: createLogger('silent'),
      beforeRepublish: async (tenantId, wasMissing) => {
        prepared.push([tenantId, wasMissing, await hot.version(tenantId)])
      },
    })
    await publisher.changed('ten_a')
    t.same(prepared, [['ten_a', true, null]], 'before the snapshot lets commits land')
    await publisher.changed('ten_a')
    t.equal(prepared.length, 1, 'not while the hot store holds the tenant')
  },
)

t.test(
  'raced by another replacement with an older read, a change still lands its version (found in review)',
  async (t) => {
    const memory = createMemoryHotStore()
    await memory.publish(emptySnapshot('ten_a', 91, 1))
    let raced = false
    const hot = {
      ...memory,
      // Another control plane replaces the same held version first, with the 89 it read earlier.
      publish: async (snap: Parameters<typeof memory.publish>[0], over?: number) => {
        if (over !== undefined && !raced) {
          raced = true
          await memory.publish(emptySnapshot('ten_a', 89, 1), over)
        }
        return memory.publish(snap, over)
      },
    }
    const publisher = createSnapshotPublisher({
      source: sourceAt('ten_a', { version: 90 }),
      hot,
      clock: systemClock,
      logger: createLogger('silent'),
    })
    await publisher.changed('ten_a')
    t.ok(raced)
    t.equal(await memory.version('ten_a'), 90, 'the committed version, not the older one the race left')
  },
)

t.test('a change that cannot land its version is not acknowledged', async (t) => {
  const memory = createMemoryHotStore()
  await memory.publish(emptySnapshot('ten_a', 91, 1))
  // A hot store that never takes it (each attempt raced).
  const hot = { ...memory, publish: async () => 'older' as const }
  const publisher = createSnapshotPublisher({
    source: sourceAt('ten_a', { version: 90 }),
    hot,
    clock: systemClock,
    logger: createLogger('silent'),
  })
  await t.rejects(publisher.changed('ten_a'), /could not be brought to the database's/)
})
