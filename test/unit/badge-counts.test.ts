import t from 'tap'
import { createBadgeCounts } from '../../src/badge/badge-counts.js'

t.test(
  'a badge count is read once per tenant and kept; views that come meanwhile share the read',
  async (t) => {
    const reads: string[] = []
    let release: () => void = () => {}
    const gate = new Promise<void>((r) => (release = r))
    const countFor = createBadgeCounts({
      load: async (tenantId) => {
        reads.push(tenantId)
        await gate
        return tenantId === 'ten_a' ? 7 : 3
      },
      ttlMs: 1000,
      max: 2,
    })
    // Found in review: views arriving together each ran the 30-day count.
    const together = Promise.all([countFor('ten_a', 0), countFor('ten_a', 0), countFor('ten_a', 1)])
    release()
    t.same(await together, [7, 7, 7])
    t.same(reads, ['ten_a'], 'one read for the three views')
    t.equal(await countFor('ten_a', 999), 7, 'kept within its time')
    t.equal(await countFor('ten_b', 0), 3, 'per tenant')
    t.equal(await countFor('ten_a', 1001), 7)
    t.same(reads, ['ten_a', 'ten_b', 'ten_a'], 'read again once its time is up')
    await countFor('ten_c', 0)
    await countFor('ten_b', 1)
    t.same(reads.at(-1), 'ten_b', 'at most `max` tenants kept: the oldest went first')
  },
)
