import t from 'tap'
import { createGroupCommitAuditLog } from '../../src/audit/group-commit.js'
import { chainReceipts, draft, EMPTY_HEAD, type Receipt, type ReceiptDraft } from '../../src/core/receipt.js'
import type { Stores, SystemOfRecord } from '../../src/store/ports/index.js'

/**
 * A system of record whose transactions are observable: each records the drafts it was
 * given, can be held open or made to fail, and only a committed one becomes visible.
 */
function fakeSor() {
  const committed: Receipt[] = []
  const batches: number[] = []
  let head = EMPTY_HEAD
  let failNext = 0
  let gate: Promise<void> = Promise.resolve()
  let open = 0
  let maxOpen = 0
  const sor: SystemOfRecord = {
    stores: {} as Stores,
    async transaction(fn) {
      open += 1
      maxOpen = Math.max(maxOpen, open)
      const staged: Receipt[] = []
      try {
        const result = await fn({
          receipts: {
            async append(drafts: readonly ReceiptDraft[]) {
              batches.push(drafts.length)
              const fail = failNext > 0
              if (fail) failNext -= 1
              await gate
              if (fail) throw new Error('connection lost')
              const chained = chainReceipts(head, drafts)
              staged.push(...chained.receipts)
              return chained.receipts
            },
          },
        } as unknown as Stores)
        committed.push(...staged)
        head = staged.length > 0 ? { seq: staged.at(-1)!.seq, hash: staged.at(-1)!.hash } : head
        return result
      } finally {
        open -= 1
      }
    },
  }
  return {
    sor,
    committed,
    batches,
    get maxOpen() {
      return maxOpen
    },
    failNext(n: number) {
      failNext = n
    },
    hold() {
      let release = () => {}
      gate = new Promise((r) => {
        release = r
      })
      return () => {
        gate = Promise.resolve()
        release()
      }
    },
  }
}

let n = 0
const d = (tenantId = 'ten_a'): ReceiptDraft =>
  draft({ receiptId: `rcp_${++n}`, tenantId, kind: 'CHECK', decision: 'ALLOW', createdAt: 1 })

t.test('appends arriving while a transaction runs share the next one', async (t) => {
  const f = fakeSor()
  const log = createGroupCommitAuditLog({ sor: f.sor, maxInFlight: 1 })
  const release = f.hold()
  const first = log.append([d()])
  const rest = Array.from({ length: 99 }, () => log.append([d()]))
  release()
  const results = await Promise.all([first, ...rest])
  t.same(f.batches, [1, 99], 'one transaction for the first caller, one for the 99 that queued behind it')
  t.same(
    results.map((r) => r[0]?.seq),
    Array.from({ length: 100 }, (_, i) => i + 1),
    'each caller gets its own receipt, in arrival order',
  )
})

t.test('batches stay within maxBatch and never split one caller', async (t) => {
  const f = fakeSor()
  const log = createGroupCommitAuditLog({ sor: f.sor, maxBatch: 10, maxInFlight: 1 })
  const release = f.hold()
  const calls = [log.append([d()]), log.append([d(), d(), d()])]
  for (let i = 0; i < 8; i++) calls.push(log.append([d(), d(), d()]))
  calls.push(log.append(Array.from({ length: 25 }, () => d())))
  release()
  const results = await Promise.all(calls)
  t.same(f.batches, [1, 9, 9, 9, 25], 'a caller larger than a batch goes alone')
  t.same(
    results[1]?.map((r) => r.seq),
    [2, 3, 4],
  )
  t.equal(f.committed.length, 53)
})

t.test('a full batch starts a second transaction without waiting for the first', async (t) => {
  const f = fakeSor()
  const log = createGroupCommitAuditLog({ sor: f.sor, maxBatch: 4, maxInFlight: 2 })
  const release = f.hold()
  const calls = Array.from({ length: 9 }, () => log.append([d()]))
  await new Promise((r) => setImmediate(r))
  t.equal(f.maxOpen, 2, 'two transactions in flight')
  release()
  await Promise.all(calls)
  t.equal(f.committed.length, 9)
})

t.test('a failed transaction rejects exactly its callers and writes nothing of theirs', async (t) => {
  const f = fakeSor()
  const log = createGroupCommitAuditLog({ sor: f.sor, maxInFlight: 1 })
  const release = f.hold()
  const ok = log.append([d()])
  await new Promise((r) => setImmediate(r))
  f.failNext(1) // the second transaction (everyone queued behind the first) fails
  const doomed = [log.append([d()]), log.append([d(), d()])]
  release()
  t.equal((await ok)[0]?.seq, 1)
  for (const p of doomed) await t.rejects(p, /connection lost/)
  t.equal(f.committed.length, 1, 'nothing of the failed batch is visible')
  const after = await log.append([d()])
  t.equal(after[0]?.seq, 2, 'the chain continues without a gap')
})

t.test('the queue is bounded: past it, append refuses at once', async (t) => {
  const f = fakeSor()
  const log = createGroupCommitAuditLog({ sor: f.sor, maxQueue: 5, maxInFlight: 1 })
  const release = f.hold()
  const running = log.append([d()])
  const waiting = [log.append([d(), d(), d()]), log.append([d(), d()])]
  await t.rejects(log.append([d()]), { code: 'unavailable', status: 503 })
  release()
  await Promise.all([running, ...waiting])
  t.equal(f.committed.length, 6)
})

t.test('a draft that cannot be serialised is refused alone', async (t) => {
  const f = fakeSor()
  const log = createGroupCommitAuditLog({ sor: f.sor })
  const bad = { ...d(), detail: { n: Number.NaN } }
  const results = await Promise.allSettled([log.append([d()]), log.append([bad]), log.append([d()])])
  t.same(
    results.map((r) => r.status),
    ['fulfilled', 'rejected', 'fulfilled'],
  )
})

t.test(
  'a draft that cannot be serialised, in one batch with others: refused alone, the others kept',
  async (t) => {
    const f = fakeSor()
    const log = createGroupCommitAuditLog({ sor: f.sor, maxInFlight: 1 })
    const release = f.hold()
    const first = log.append([d()])
    await new Promise((r) => setImmediate(r))
    const good = [d(), d()]
    const bad = { ...d(), detail: { n: Number.POSITIVE_INFINITY } }
    const calls = [
      log.append([good[0] as ReceiptDraft]),
      log.append([bad]),
      log.append([good[1] as ReceiptDraft]),
    ]
    release()
    const results = await Promise.allSettled([first, ...calls])
    t.same(
      results.map((r) => r.status),
      ['fulfilled', 'fulfilled', 'rejected', 'fulfilled'],
    )
    t.same(f.batches, [1, 3, 2], 'the three shared a batch; the two good ones went into the next')
    t.same(
      f.committed.map((r) => [r.receiptId, r.seq]),
      [
        [(await first)[0]?.receiptId, 1],
        [good[0]?.receiptId, 2],
        [good[1]?.receiptId, 3],
      ],
      'gap-free, in arrival order',
    )
  },
)

t.test('flush resolves once every accepted append is durable', async (t) => {
  const f = fakeSor()
  const woke: string[][] = []
  const log = createGroupCommitAuditLog({ sor: f.sor, onCommitted: (ids) => woke.push([...ids]) })
  await log.flush()
  const release = f.hold()
  const calls = [log.append([d('ten_a')]), log.append([d('ten_b')]), log.append([d('ten_a')])]
  let flushed = false
  const flushing = log.flush().then(() => {
    flushed = true
  })
  await new Promise((r) => setImmediate(r))
  t.equal(flushed, false)
  release()
  await flushing
  t.equal(f.committed.length, 3)
  await Promise.all(calls)
  t.same([...new Set(woke.flat())].sort(), ['ten_a', 'ten_b'], 'committed tenants are announced')
})
