import t, { type Test } from 'tap'
import { createDirectAuditLog } from '../../src/audit/audit-log.js'
import { createGroupCommitAuditLog } from '../../src/audit/group-commit.js'
import { createReceiptDrain } from '../../src/audit/receipt-drain.js'
import { newId } from '../../src/core/ids.js'
import { draft, type ReceiptDraft } from '../../src/core/receipt.js'
import { createLogger } from '../../src/observability/logger.js'
import type { HotStore, ReceiptQueue } from '../../src/store/ports/hot-store.js'
import type { SystemOfRecord } from '../../src/store/ports/index.js'
import { createSystemOfRecord } from '../../src/store/postgres/system-of-record.js'
import { openTestDatabase } from '../helpers/backends.js'
import { capturingLogger, LOG_LEVEL } from '../helpers/proxy.js'
import { openRedisHotStore, subscribed } from '../helpers/redis.js'
import { emptySnapshot } from '../helpers/snapshots.js'
import { waitFor } from '../helpers/wait.js'

const now = () => Math.floor(Date.now() / 1000)
const snapshot = (tenantId: string) => emptySnapshot(tenantId, 1, now())

/** Commits `n` ALLOWed CHECK receipts of one tenant into its stream, as a proxy does; their ids in order. */
/** Every queued receipt stored once, in order, linked (seq 1…n), and nothing left in the stream. */
async function allDrainedInOrder(
  t: Test,
  real: SystemOfRecord,
  hot: HotStore,
  tenantId: string,
  ids: string[],
): Promise<void> {
  const list = await real.stores.receipts.list(tenantId, 0, 2_000)
  t.same(
    list.map((r) => r.receiptId),
    ids,
    'every receipt once, in order',
  )
  t.same(
    list.map((r) => r.seq),
    ids.map((_, i) => i + 1),
  )
  for (let i = 1; i < list.length; i++) t.equal(list[i]?.prevHash, list[i - 1]?.hash)
  t.equal(await (hot.receiptQueue as ReceiptQueue).backlog([tenantId]), 0, 'nothing left in the stream')
}

/** A drain of one tenant whose first acknowledgement fails (Redis timing out, or lost after the commit). */
function drainFailingFirstAck(queue: ReceiptQueue, sor: SystemOfRecord, tenant: () => string) {
  let acks = 0
  return createReceiptDrain({
    queue: {
      ...queue,
      ack: (...args) => (++acks === 1 ? Promise.reject(new Error('Command timed out')) : queue.ack(...args)),
    },
    sor,
    audit: createDirectAuditLog(sor),
    logger: createLogger('silent'),
    consumer: 'd1',
    tenantIds: async () => [tenant()],
  })
}

async function queueReceipts(hot: HotStore, tenantId: string, n: number): Promise<string[]> {
  const ids: string[] = []
  for (let i = 0; i < n; i++) {
    const receiptId = newId('receipt')
    ids.push(receiptId)
    const r = draft({ receiptId, tenantId, kind: 'CHECK', decision: 'ALLOW', createdAt: now() })
    await hot.commit({
      tenantId,
      version: 1,
      quota: null,
      grantCandidates: [],
      durable: { otherwise: { receipts: [r], actions: [] } },
    })
  }
  return ids
}

t.test('drain: a hint that lands during a pass is acted on at once, not at the next poll', async (t) => {
  const { tr, redis, hot } = await openRedisHotStore(t, { nowSeconds: now })
  const tdb = await openTestDatabase('pglite-memory')
  const sor = createSystemOfRecord(tdb.db)
  const queue = hot.receiptQueue as ReceiptQueue

  const [a, b] = [newId('tenant'), newId('tenant')]
  for (const ten of [a, b]) await hot.publish(snapshot(ten))
  const commitOne = async (tenantId: string) => (await queueReceipts(hot, tenantId, 1))[0] as string

  // While the drain reads tenant a, tenant b queues a receipt and its hint reaches the drain.
  let during: Promise<string> | null = null
  let hints = 0
  const racing: ReceiptQueue = {
    ...queue,
    onQueued(listener) {
      return queue.onQueued(() => {
        hints++
        listener()
      })
    },
    async read(tenantId, consumer, count) {
      if (tenantId === a && !during) {
        const before = hints
        during = commitOne(b)
        await during
        await waitFor(() => hints > before, 10_000, "b's hint, during the pass")
      }
      return queue.read(tenantId, consumer, count)
    },
  }
  const drain = createReceiptDrain({
    queue: racing,
    sor,
    audit: createDirectAuditLog(sor),
    logger: createLogger('silent'),
    consumer: 'd1',
    tenantIds: async () => [],
    // Far longer than the test waits: only a hint can start the next pass.
    pollIntervalMs: 60_000,
    sweepIntervalMs: 60_000,
  })
  t.teardown(async () => {
    await drain.stop()
    await tdb.close()
  })
  drain.start()
  // The drain subscribes to hints as it starts: a's commit waits for that SUBSCRIBE to land.
  await waitFor(() => subscribed([redis], `${tr.prefix}*`, 'classic'), 10_000, 'the drain-hint SUBSCRIBE')
  const first = await commitOne(a)

  // The poll interval is a minute: only the hints can have drained them within the deadline.
  const stored = async (tenantId: string, receiptId: string) => {
    for (const deadline = Date.now() + 20_000; Date.now() < deadline; ) {
      if (await sor.stores.receipts.get(tenantId, receiptId)) return true
      await new Promise((r) => setTimeout(r, 30))
    }
    return false
  }
  t.ok(await stored(a, first), "tenant a's receipt is drained")
  t.ok(during, 'tenant b committed during the pass')
  t.ok(
    await stored(b, await (during as unknown as Promise<string>)),
    "tenant b's receipt is drained (well before the next poll)",
  )
})

t.test('drain: a failed commit loses nothing, the batch read ahead of it included', async (t) => {
  const { hot } = await openRedisHotStore(t, { nowSeconds: now, claimIdleMs: 100 })
  const tdb = await openTestDatabase('postgres')
  const real = createSystemOfRecord(tdb.db)
  // The second transaction fails: by then the drain has read the batch after it.
  let transactions = 0
  const sor = {
    ...real,
    transaction: <T>(fn: Parameters<typeof real.transaction<T>>[0]) => {
      transactions += 1
      return transactions === 2 ? Promise.reject(new Error('postgres went away')) : real.transaction(fn)
    },
  }
  t.teardown(() => tdb.close())
  const ten = newId('tenant')
  await hot.publish(snapshot(ten))
  const ids = await queueReceipts(hot, ten, 1_250)
  const drain = createReceiptDrain({
    queue: hot.receiptQueue as ReceiptQueue,
    sor,
    // Receipts alone are stored through the audit log: its second transaction is the one that fails.
    audit: createDirectAuditLog(sor),
    logger: createLogger('silent'),
    consumer: 'd1',
    tenantIds: async () => [ten],
  })
  await t.rejects(drain.drainAll(), /postgres went away/)
  t.equal((await real.stores.receipts.list(ten, 0, 2_000)).length, 500, 'the first batch committed')
  await new Promise((r) => setTimeout(r, 150)) // past claimIdleMs: the unacknowledged entries are claimed
  await drain.drainAll()
  await drain.drainAll()
  await allDrainedInOrder(t, real, hot, ten, ids)
})

t.test(
  'drain through the group commit: a failed statement and a failed retry lose nothing, the chain stays whole',
  async (t) => {
    const { hot } = await openRedisHotStore(t, { nowSeconds: now, claimIdleMs: 100 })
    const tdb = await openTestDatabase('postgres')
    const real = createSystemOfRecord(tdb.db)
    // The second batch goes down the fast path (the first taught the head): its statement
    // fails, and so does the transaction it falls back to.
    const calls = { chained: 0, transactions: 0 }
    const sor: SystemOfRecord = {
      ...real,
      stores: {
        ...real.stores,
        receipts: {
          ...real.stores.receipts,
          appendChained: (batches) => {
            calls.chained += 1
            return calls.chained === 1
              ? Promise.reject(new Error('statement cut'))
              : real.stores.receipts.appendChained(batches)
          },
        },
      },
      transaction: (fn) => {
        calls.transactions += 1
        return calls.transactions === 2
          ? Promise.reject(new Error('postgres went away'))
          : real.transaction(fn)
      },
    }
    t.teardown(() => tdb.close())
    const ten = newId('tenant')
    await hot.publish(snapshot(ten))
    const ids = await queueReceipts(hot, ten, 1_750)
    const audit = createGroupCommitAuditLog({ sor, heads: { backOffMs: 0 } })
    const drain = createReceiptDrain({
      queue: hot.receiptQueue as ReceiptQueue,
      sor,
      audit,
      logger: createLogger('silent'),
      consumer: 'd1',
      tenantIds: async () => [ten],
    })
    await t.rejects(drain.drainAll(), /postgres went away/)
    t.same(
      calls,
      { chained: 1, transactions: 2 },
      'the first batch by transaction, the second failed both ways',
    )
    t.equal((await real.stores.receipts.list(ten, 0, 2_000)).length, 500, 'the first batch committed')
    await new Promise((r) => setTimeout(r, 150)) // past claimIdleMs: the unacknowledged entries are claimed
    await drain.drainAll()
    await drain.drainAll()
    t.ok(calls.chained > 1, 'later batches went down the fast path again')
    await allDrainedInOrder(t, real, hot, ten, ids)
  },
)

t.test(
  'drain: an entry that cannot go into the log stays in the stream, reported once; the rest are stored',
  async (t) => {
    const { hot, redis, tr } = await openRedisHotStore(t, { nowSeconds: now, claimIdleMs: 100 })
    const tdb = await openTestDatabase('postgres')
    t.teardown(() => tdb.close())
    const sor = createSystemOfRecord(tdb.db)
    const { logger, lines } = capturingLogger()
    const ten = newId('tenant')
    const other = newId('tenant')
    await hot.publish(snapshot(ten))
    const commit = (receipts: unknown[]) =>
      hot.commit({
        tenantId: ten,
        version: 1,
        quota: null,
        grantCandidates: [],
        durable: { otherwise: { receipts: receipts as ReceiptDraft[], actions: [] } },
      })
    const [first] = await queueReceipts(hot, ten, 1)
    // A proxy of another version, or a forged entry: the wrong type where Postgres wants a number,
    // a receipt of another tenant, and an entry with no JSON payload at all.
    await commit([
      {
        ...draft({ receiptId: newId('receipt'), tenantId: ten, kind: 'CHECK', createdAt: 0 }),
        createdAt: '0,1',
      },
    ])
    await commit([draft({ receiptId: newId('receipt'), tenantId: other, kind: 'CHECK', createdAt: now() })])
    await redis.xadd(`${tr.prefix}{${ten}}:rq`, '*', 'r', '{not json')
    // Found in review: right types, but a NUL Postgres refuses in a text column, and a member of
    // its own that would be hashed into the body and then overwritten in the stored row.
    await commit([
      draft({
        receiptId: newId('receipt'),
        tenantId: ten,
        kind: 'CHECK',
        createdAt: now(),
        keyId: 'key_\u0000x',
      }),
    ])
    await commit([
      {
        ...draft({ receiptId: newId('receipt'), tenantId: ten, kind: 'CHECK', createdAt: now() }),
        hash: 'x',
      },
    ])
    const [last] = await queueReceipts(hot, ten, 1)
    const drain = createReceiptDrain({
      queue: hot.receiptQueue as ReceiptQueue,
      sor,
      audit: createGroupCommitAuditLog({ sor }),
      logger,
      consumer: 'd1',
      tenantIds: async () => [ten],
    })
    await drain.drainAll()
    t.same(
      (await sor.stores.receipts.list(ten, 0, 10)).map((r) => [r.receiptId, r.seq]),
      [
        [first, 1],
        [last, 2],
      ],
      'the good entries are stored, in order, around the unfit ones',
    )
    t.same(await sor.stores.receipts.list(other, 0, 10), [], "nothing in the other tenant's log")
    t.equal(
      await (hot.receiptQueue as ReceiptQueue).backlog([ten]),
      5,
      'the unfit entries stay in the stream',
    )
    const reported = () => lines.filter((l) => l.level === LOG_LEVEL.error)
    t.match(
      reported().map((l) => (l as unknown as { problem: string }).problem),
      [/createdAt is not a time/, /another tenant/, /not an object/, /cannot store/, /unknown member hash/],
    )
    // Claimed again after claimIdleMs: still left alone, and not reported again.
    await new Promise((r) => setTimeout(r, 150))
    await drain.drainAll()
    t.equal((await sor.stores.receipts.list(ten, 0, 10)).length, 2)
    t.equal(await (hot.receiptQueue as ReceiptQueue).backlog([ten]), 5)
    t.equal(reported().length, 5, 'each reported once')
  },
)

t.test('drain: the batch read ahead failing while one is stored does not end the process', async (t) => {
  const { hot } = await openRedisHotStore(t, { nowSeconds: now, claimIdleMs: 100 })
  const tdb = await openTestDatabase('postgres')
  t.teardown(() => tdb.close())
  const real = createSystemOfRecord(tdb.db)
  // Storing a batch takes a while (a slow Postgres) ...
  const sor: SystemOfRecord = {
    ...real,
    transaction: async (fn) => {
      await new Promise((r) => setTimeout(r, 200))
      return real.transaction(fn)
    },
  }
  const queue = hot.receiptQueue as ReceiptQueue
  let reads = 0
  // ... and Redis fails the read made meanwhile at once (a timeout, a cut connection).
  const flaky: ReceiptQueue = {
    ...queue,
    read: (...args) => (++reads === 2 ? Promise.reject(new Error('Command timed out')) : queue.read(...args)),
  }
  const ten = newId('tenant')
  await hot.publish(snapshot(ten))
  const ids = await queueReceipts(hot, ten, 750)
  const drain = createReceiptDrain({
    queue: flaky,
    sor,
    audit: createDirectAuditLog(sor),
    logger: createLogger('silent'),
    consumer: 'd1',
    tenantIds: async () => [ten],
  })
  // tap fails the test on an unhandled rejection, which ends a real process.
  await t.rejects(drain.drainAll(), /Command timed out/, 'the pass fails with the read')
  t.equal((await real.stores.receipts.list(ten, 0, 2_000)).length, 500, 'the batch in hand was stored')
  await drain.drainAll()
  await allDrainedInOrder(t, real, hot, ten, ids)
})

t.test('drain: a stream that lost its consumer group (Redis lost its data) is drained again', async (t) => {
  const { hot, redis, tr } = await openRedisHotStore(t, { nowSeconds: now, claimIdleMs: 100 })
  const tdb = await openTestDatabase('postgres')
  t.teardown(() => tdb.close())
  const real = createSystemOfRecord(tdb.db)
  const ten = newId('tenant')
  await hot.publish(snapshot(ten))
  const drain = createReceiptDrain({
    queue: hot.receiptQueue as ReceiptQueue,
    sor: real,
    audit: createDirectAuditLog(real),
    logger: createLogger('silent'),
    consumer: 'd1',
    tenantIds: async () => [ten],
  })
  const before = await queueReceipts(hot, ten, 3)
  await drain.drainAll()
  // Redis restarts empty: the next commit's XADD makes the stream again, without its group.
  t.equal(await redis.del(`${tr.prefix}{${ten}}:rq`), 1, 'the stream and its group are gone')
  const after = await queueReceipts(hot, ten, 4)
  await drain.drainAll()
  await allDrainedInOrder(t, real, hot, ten, [...before, ...after])
})

t.test("drain: one tenant's broken stream does not hold up the others", async (t) => {
  const { hot } = await openRedisHotStore(t, { nowSeconds: now, claimIdleMs: 100 })
  const tdb = await openTestDatabase('postgres')
  t.teardown(() => tdb.close())
  const real = createSystemOfRecord(tdb.db)
  const broken = newId('tenant')
  const fine = newId('tenant')
  await hot.publish(snapshot(fine))
  const ids = await queueReceipts(hot, fine, 3)
  const queue = hot.receiptQueue as ReceiptQueue
  const drain = createReceiptDrain({
    queue: {
      ...queue,
      // The broken tenant comes first.
      dirtyTenants: async () => [broken, fine],
      read: (tenantId, ...rest) =>
        tenantId === broken
          ? Promise.reject(new Error('WRONGTYPE Operation against a key holding the wrong kind of value'))
          : queue.read(tenantId, ...rest),
    },
    sor: real,
    audit: createDirectAuditLog(real),
    logger: createLogger('silent'),
    consumer: 'd1',
    tenantIds: async () => [broken, fine],
  })
  await t.rejects(drain.drainAll(), /WRONGTYPE/, 'the pass reports the broken tenant')
  await allDrainedInOrder(t, real, hot, fine, ids)
})

t.test('drain: a batch is acknowledged while the next one is stored', async (t) => {
  // Entries read are not claimed again while their acknowledgement is on its way.
  const { hot } = await openRedisHotStore(t, { nowSeconds: now, claimIdleMs: 10_000 })
  const tdb = await openTestDatabase('postgres')
  t.teardown(() => tdb.close())
  const real = createSystemOfRecord(tdb.db)
  const queue = hot.receiptQueue as ReceiptQueue
  // What happened, in order: each batch's store starting, each acknowledgement ending.
  const events: string[] = []
  let stores = 0
  let acks = 0
  // Acknowledgement n ends only once store n + 1 has started (the last one, of the third and
  // last batch, at once): a drain that waited for each acknowledgement before storing on would
  // record it before the next store. Not timers: on a loaded machine those reorder.
  const storeStarted = new Map<number, () => void>()
  const started = (n: number) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, 5_000)
      storeStarted.set(n, () => {
        clearTimeout(timer)
        resolve()
      })
    })
  const sor: SystemOfRecord = {
    ...real,
    transaction: (fn) => {
      events.push(`store ${++stores}`)
      storeStarted.get(stores)?.()
      return real.transaction(fn)
    },
  }
  const drain = createReceiptDrain({
    queue: {
      ...queue,
      ack: async (...args) => {
        const n = ++acks
        if (n < 3) await started(n + 1)
        await queue.ack(...args)
        events.push(`acked ${n}`)
      },
    },
    sor,
    audit: createDirectAuditLog(sor),
    logger: createLogger('silent'),
    consumer: 'd1',
    tenantIds: async () => [ten],
  })
  const ten = newId('tenant')
  await hot.publish(snapshot(ten))
  const ids = await queueReceipts(hot, ten, 1_250)
  await drain.drainAll()
  t.same(
    events,
    ['store 1', 'store 2', 'acked 1', 'store 3', 'acked 2', 'acked 3'],
    'the second batch is stored before the first is acknowledged; one acknowledgement in flight',
  )
  await allDrainedInOrder(t, real, hot, ten, ids)
})

t.test(
  'drain: a failed acknowledgement fails the pass and loses nothing; its batch is not stored twice',
  async (t) => {
    const { hot } = await openRedisHotStore(t, { nowSeconds: now, claimIdleMs: 100 })
    const tdb = await openTestDatabase('postgres')
    t.teardown(() => tdb.close())
    const real = createSystemOfRecord(tdb.db)
    const queue = hot.receiptQueue as ReceiptQueue
    // The first acknowledgement fails (Redis timing out) while the next batch is stored.
    const drain = drainFailingFirstAck(queue, real, () => ten)
    const ten = newId('tenant')
    await hot.publish(snapshot(ten))
    const ids = await queueReceipts(hot, ten, 1_250)
    // tap fails the test on an unhandled rejection, which ends a real process.
    await t.rejects(drain.drainAll(), /Command timed out/, 'the pass fails with the acknowledgement')
    t.equal(
      (await real.stores.receipts.list(ten, 0, 2_000)).length,
      1_000,
      'the batch stored meanwhile is kept',
    )
    t.equal(
      await queue.backlog([ten]),
      750,
      'the unacknowledged batch and the one read ahead stay in the stream',
    )
    await new Promise((r) => setTimeout(r, 150)) // past claimIdleMs: the unacknowledged entries are claimed
    await drain.drainAll()
    await drain.drainAll()
    // Appended again, they change nothing: every receipt once, in order.
    await allDrainedInOrder(t, real, hot, ten, ids)
  },
)

t.test(
  'drain: a staged action delivered again after it was resolved stays resolved (found in review)',
  async (t) => {
    const { hot } = await openRedisHotStore(t, { nowSeconds: now, claimIdleMs: 100 })
    const tdb = await openTestDatabase('postgres')
    t.teardown(() => tdb.close())
    const real = createSystemOfRecord(tdb.db)
    const queue = hot.receiptQueue as ReceiptQueue
    const ten = newId('tenant')
    await real.stores.tenants.create({ id: ten, name: 'T', createdAt: 1, sponsorHash: 'x' })
    await hot.publish(snapshot(ten))
    // A proxy's STEP_UP: its CHECK and ACTION_STAGED receipts and the pending action, one payload.
    const actionId = newId('action')
    const check = draft({
      receiptId: newId('receipt'),
      tenantId: ten,
      kind: 'CHECK',
      decision: 'STEP_UP',
      createdAt: now(),
    })
    const staged = draft({
      receiptId: newId('receipt'),
      tenantId: ten,
      kind: 'ACTION_STAGED',
      decision: 'STEP_UP',
      createdAt: now(),
      detail: { actionId },
    })
    await hot.commit({
      tenantId: ten,
      version: 1,
      quota: null,
      grantCandidates: [],
      durable: {
        otherwise: {
          receipts: [check, staged],
          actions: [
            {
              actionId,
              tenantId: ten,
              systemId: 'sys_billing',
              tool: 'http',
              params: {},
              verb: 'refund',
              target: null,
              environment: null,
              principalId: 'prn_a',
              keyId: 'key_a',
              stagedReceiptId: staged.receiptId,
              createdAt: now(),
              expiresAt: now() + 3600,
            },
          ],
        },
      },
    })
    // The first acknowledgement is lost after the commit (a crash, a Redis blip).
    const drain = drainFailingFirstAck(queue, real, () => ten)
    await t.rejects(drain.drainAll(), /Command timed out/)
    t.ok(await real.stores.actions.get(ten, actionId), 'the action is pending')
    // Approved (or dismissed): an approval removes the pending action as it claims it.
    t.equal(await real.stores.actions.remove(ten, actionId), true)
    await new Promise((r) => setTimeout(r, 150)) // past claimIdleMs: the unacknowledged entry is claimed
    await drain.drainAll()
    t.equal(await queue.backlog([ten]), 0, 'the entry delivered again is acknowledged')
    t.equal(await real.stores.actions.get(ten, actionId), null, 'the resolved action did not come back')
    t.same(
      (await real.stores.receipts.list(ten, 0, 10)).map((r) => r.kind),
      ['CHECK', 'ACTION_STAGED'],
      'its receipts stored once',
    )
  },
)
