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
