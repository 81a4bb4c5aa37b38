import t from 'tap'
import { createGroupCommitAuditLog, type GroupCommitOptions } from '../../src/audit/group-commit.js'
import {
  type ChainHead,
  chainReceipts,
  draft,
  EMPTY_HEAD,
  type Receipt,
  type ReceiptDraft,
} from '../../src/core/receipt.js'
import type { ChainedReceipts } from '../../src/store/ports/audit.js'
import type { Stores, SystemOfRecord } from '../../src/store/ports/index.js'

/**
 * A system of record whose writes are observable: each records the drafts it was given and
 * which path took them (a transaction, or the one-statement appendChained), can be held
 * open or made to fail, and only a committed one becomes visible. Heads are per tenant.
 */
function fakeSor() {
  const committed: Receipt[] = []
  const batches: number[] = []
  const paths: ('transaction' | 'chained')[] = []
  const heads = new Map<string, ChainHead>()
  const headOf = (tenantId: string) => heads.get(tenantId) ?? EMPTY_HEAD
  let failNext = 0
  let gate: Promise<void> = Promise.resolve()
  let open = 0
  let maxOpen = 0
  // Heads are locked from the first write to the commit, as Postgres's head rows are.
  let locked: Promise<void> = Promise.resolve()
  function lock(): Promise<() => void> {
    const before = locked
    let unlock = () => {}
    locked = new Promise((r) => {
      unlock = r
    })
    return before.then(() => unlock)
  }
  async function enter(size: number, path: 'transaction' | 'chained'): Promise<void> {
    batches.push(size)
    paths.push(path)
    const fail = failNext > 0
    if (fail) failNext -= 1
    await gate
    if (fail) throw new Error('connection lost')
  }
  const receipts = {
    async append(drafts: readonly ReceiptDraft[]): Promise<Receipt[]> {
      throw new Error(`outside a transaction: ${drafts.length}`)
    },
    async appendChained(list: readonly ChainedReceipts[]) {
      open += 1
      maxOpen = Math.max(maxOpen, open)
      try {
        await enter(
          list.reduce((k, b) => k + b.receipts.length, 0),
          'chained',
        )
        const unlock = await lock()
        unlock() // the check and the write below happen at once
        const stale: string[] = []
        for (const b of list) {
          const head = headOf(b.tenantId)
          if (head.seq !== b.from.seq || head.hash !== b.from.hash) stale.push(b.tenantId)
        }
        // As in Postgres, only the rows of tenants still at `from` are inserted, so only they can collide.
        const stored = new Set(committed.map((r) => r.receiptId))
        const ready = list.filter((b) => !stale.includes(b.tenantId))
        if (ready.some((b) => b.receipts.some((r) => stored.has(r.receiptId))))
          throw Object.assign(new Error('duplicate key'), { code: '23505' })
        for (const b of list) {
          if (stale.includes(b.tenantId)) continue
          committed.push(...b.receipts)
          heads.set(b.tenantId, b.to)
        }
        return { stale }
      } finally {
        open -= 1
      }
    },
  }
  const sor: SystemOfRecord = {
    stores: { receipts } as unknown as Stores,
    async transaction(fn) {
      open += 1
      maxOpen = Math.max(maxOpen, open)
      const staged: Receipt[] = []
      let unlock = () => {}
      try {
        const result = await fn({
          receipts: {
            async append(drafts: readonly ReceiptDraft[]) {
              await enter(drafts.length, 'transaction')
              unlock = await lock()
              const seen = new Map(committed.map((r) => [r.receiptId, r]))
              const out: Receipt[] = []
              const moved = new Map<string, ChainHead>()
              for (const d of drafts) {
                const stored = seen.get(d.receiptId)
                if (stored) {
                  out.push(stored)
                  continue
                }
                const chained = chainReceipts(moved.get(d.tenantId) ?? headOf(d.tenantId), [d])
                moved.set(d.tenantId, chained.head)
                staged.push(...chained.receipts)
                out.push(...chained.receipts)
              }
              return out
            },
          },
        } as unknown as Stores)
        committed.push(...staged)
        for (const r of staged) heads.set(r.tenantId, { seq: r.seq, hash: r.hash })
        return result
      } finally {
        unlock()
        open -= 1
      }
    },
  }
  return {
    sor,
    committed,
    batches,
    paths,
    /** Moves a tenant's head as another writer (a replica, an admin change) would. */
    moveHead(tenantId: string) {
      const chained = chainReceipts(headOf(tenantId), [d(tenantId)])
      committed.push(...chained.receipts)
      heads.set(tenantId, chained.head)
    },
    get maxOpen() {
      return maxOpen
    },
    failNext(k: number) {
      failNext = k
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

/** A group commit whose receipts are counted by path, as the metric counts them. */
function countingLog(sor: SystemOfRecord, opts: Omit<GroupCommitOptions, 'sor' | 'onPath'>) {
  const counted: Record<string, number> = {}
  const log = createGroupCommitAuditLog({
    ...opts,
    sor,
    onPath: (path, n) => {
      counted[path] = (counted[path] ?? 0) + n
    },
  })
  return { log, counted }
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
  t.same(f.batches, [1, 99], 'one write for the first caller, one for the 99 that queued behind it')
  t.same(f.paths, ['transaction', 'chained'], 'once the head is known, a batch is one statement')
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
  f.failNext(2) // the second batch (everyone queued behind the first) fails, and so does its retry
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

t.test(
  'a head moved by another writer: that batch goes through a transaction, the chain stays whole, the tenant backs off',
  async (t) => {
    const f = fakeSor()
    let now = 0
    const { log, counted } = countingLog(f.sor, {
      maxInFlight: 1,
      heads: { nowMs: () => now, backOffMs: 1000 },
    })
    await log.append([d()])
    await log.append([d()])
    f.moveHead('ten_a')
    const moved = await log.append([d(), d()])
    t.same(
      moved.map((r) => r.seq),
      [4, 5],
      "chained after the other writer's receipt",
    )
    t.equal((await log.append([d()]))[0]?.seq, 6)
    now = 999
    t.equal((await log.append([d()]))[0]?.seq, 7)
    now = 1000
    t.equal((await log.append([d()]))[0]?.seq, 8)
    t.equal((await log.append([d()]))[0]?.seq, 9)
    t.same(
      f.paths,
      [
        'transaction',
        'chained',
        'chained',
        'transaction',
        'transaction',
        'transaction',
        'transaction',
        'chained',
      ],
      'stale and retried; a second on the transaction path; relearned, then fast again',
    )
    t.same(counted, { transaction: 6, chained: 2, stale: 2 }, 'receipts counted by path')
    const seqs = f.committed.map((r) => r.seq)
    t.same(seqs, [1, 2, 3, 4, 5, 6, 7, 8, 9], 'no fork, no gap')
    for (let i = 1; i < f.committed.length; i++) t.equal(f.committed[i]?.prevHash, f.committed[i - 1]?.hash)
  },
)

t.test(
  "a caller spanning tenants goes whole through a transaction: if it fails, none of the caller's drafts is stored",
  async (t) => {
    const f = fakeSor()
    const log = createGroupCommitAuditLog({ sor: f.sor, maxInFlight: 1 })
    await Promise.all([log.append([d('ten_a')]), log.append([d('ten_b')])])
    // Were the caller split, ten_a's draft would be stored by the statement and ten_b's stale.
    f.moveHead('ten_b')
    f.failNext(1)
    const [a, b] = [d('ten_a'), d('ten_b')]
    await t.rejects(log.append([a, b]), /connection lost/)
    t.same(f.paths.slice(2), ['transaction'], 'never split between the statement and a transaction')
    t.notOk(
      f.committed.some((r) => r.receiptId === a.receiptId || r.receiptId === b.receiptId),
      'neither draft stored',
    )
    const out = await log.append([a, b])
    t.same(
      out.map((r) => [r.tenantId, r.seq]),
      [
        ['ten_a', 2],
        ['ten_b', 3],
      ],
    )
  },
)

t.test("an append inside a caller's transaction forgets the tenant's head", async (t) => {
  const f = fakeSor()
  const log = createGroupCommitAuditLog({ sor: f.sor, maxInFlight: 1 })
  await log.append([d()])
  await log.append([d()])
  await f.sor.transaction((stores) => log.appendWith(stores, [d()]))
  t.equal((await log.append([d()]))[0]?.seq, 4)
  t.equal((await log.append([d()]))[0]?.seq, 5)
  t.same(
    f.paths,
    ['transaction', 'chained', 'transaction', 'transaction', 'chained'],
    'no statement sent from the head it knew was moved; relearned at once (no back-off)',
  )
})

t.test("only the stale tenant's callers are retried; the others resolve from the statement", async (t) => {
  const f = fakeSor()
  const log = createGroupCommitAuditLog({ sor: f.sor, maxInFlight: 1 })
  await Promise.all([log.append([d('ten_a')]), log.append([d('ten_b')])])
  f.moveHead('ten_b')
  const release = f.hold()
  const first = log.append([d('ten_a')])
  await new Promise((r) => setImmediate(r))
  const [a, b] = [log.append([d('ten_a')]), log.append([d('ten_b')])]
  release()
  await first
  t.equal((await a)[0]?.seq, 3)
  t.equal((await b)[0]?.seq, 3, "after the other writer's seq 2")
  t.same(f.paths.slice(-3), ['chained', 'chained', 'transaction'])
  t.same(f.batches.slice(-3), [1, 2, 1], "the retry holds the stale tenant's caller alone")
})

t.test(
  'batches in flight together chain one after the other, and a failed one takes the later ones with it',
  async (t) => {
    const f = fakeSor()
    const log = createGroupCommitAuditLog({ sor: f.sor, maxBatch: 2, maxInFlight: 2 })
    await log.append([d()])
    let release = f.hold()
    const pipelined = Array.from({ length: 4 }, () => log.append([d()]))
    await new Promise((r) => setImmediate(r))
    t.equal(f.maxOpen, 2, 'two statements in flight, the second chained from where the first will end')
    release()
    t.same(
      (await Promise.all(pipelined)).map((r) => r[0]?.seq),
      [2, 3, 4, 5],
    )
    t.same(f.paths, ['transaction', 'chained', 'chained'])

    // The first of two statements in flight fails: the second was chained from a head that never
    // came to be, so it is stale; both go through transactions and the chain stays gap-free.
    release = f.hold()
    f.failNext(1)
    const second = Array.from({ length: 4 }, () => log.append([d()]))
    await new Promise((r) => setImmediate(r))
    release()
    t.same((await Promise.all(second)).map((r) => r[0]?.seq).sort(), [6, 7, 8, 9])
    t.same(f.paths.slice(3, 5), ['chained', 'chained'])
    t.same(f.paths.slice(5), ['transaction', 'transaction'], 'each retried in a transaction')
    t.same(
      f.committed.map((r) => r.seq),
      [1, 2, 3, 4, 5, 6, 7, 8, 9],
    )
    for (let i = 1; i < f.committed.length; i++) t.equal(f.committed[i]?.prevHash, f.committed[i - 1]?.hash)
    t.equal((await log.append([d()]))[0]?.seq, 10)
  },
)

t.test(
  'a receipt already stored (a redelivery) comes back as stored, through the transaction path',
  async (t) => {
    const f = fakeSor()
    const log = createGroupCommitAuditLog({ sor: f.sor })
    const [first] = await log.append([d()])
    await log.append([d()])
    const { seq: _s, prevHash: _p, hash: _h, ...again } = first as Receipt
    const out = await log.append([again, d()])
    t.same(out[0], first, 'the stored receipt')
    t.equal(out[1]?.seq, 3)
    t.same(
      f.paths,
      ['transaction', 'chained', 'chained', 'transaction'],
      'the statement failed whole, then the retry',
    )
    t.equal(f.committed.length, 3)
  },
)

t.test('a failed statement: counted, retried in a transaction, the tenant backs off', async (t) => {
  const f = fakeSor()
  let now = 0
  const { log, counted } = countingLog(f.sor, {
    maxInFlight: 1,
    heads: { nowMs: () => now, backOffMs: 1000 },
  })
  await log.append([d()])
  f.failNext(1)
  t.same(
    (await log.append([d(), d()])).map((r) => r.seq),
    [2, 3],
    'stored by the retry',
  )
  await log.append([d()])
  now = 1000
  await log.append([d()])
  await log.append([d()])
  t.same(f.paths, ['transaction', 'chained', 'transaction', 'transaction', 'transaction', 'chained'])
  t.same(counted, { transaction: 5, failed: 2, chained: 1 })
})

t.test('a stale statement this process caused itself (appendWith meanwhile) costs no back-off', async (t) => {
  const f = fakeSor()
  const log = createGroupCommitAuditLog({ sor: f.sor, maxInFlight: 1, heads: { nowMs: () => 0 } })
  await log.append([d()])
  const release = f.hold()
  const inFlight = log.append([d()])
  await new Promise((r) => setImmediate(r))
  // An append inside another transaction of this process moves the head while the statement waits.
  const moving = { receipts: { append: async () => [f.moveHead('ten_a')] } } as unknown as Stores
  await log.appendWith(moving, [d()])
  release()
  t.equal((await inFlight)[0]?.seq, 3, "after the other append's seq 2")
  t.equal((await log.append([d()]))[0]?.seq, 4)
  t.same(f.paths, ['transaction', 'chained', 'transaction', 'chained'], 'relearned at once, fast again')
})

t.test(
  'a caller spanning tenants: batches planned while its transaction runs do not chain from its tenants',
  async (t) => {
    const f = fakeSor()
    const { log, counted } = countingLog(f.sor, { maxBatch: 2, maxInFlight: 2, heads: { nowMs: () => 0 } })
    await Promise.all([log.append([d('ten_a')]), log.append([d('ten_b')])])
    await log.append([d('ten_a')])
    const release = f.hold()
    const spanning = log.append([d('ten_a'), d('ten_b')])
    await new Promise((r) => setImmediate(r))
    const next = [log.append([d('ten_a')]), log.append([d('ten_a')])]
    await new Promise((r) => setImmediate(r))
    t.equal(f.maxOpen, 2, "the second batch went while the spanning caller's transaction ran")
    release()
    await spanning
    t.same((await Promise.all(next)).map((r) => r[0]?.seq).sort(), [4, 5])
    t.same(f.paths.slice(-2), ['transaction', 'transaction'], 'neither sent from a head about to move')
    t.notOk(counted.stale, 'no stale statement')
  },
)
