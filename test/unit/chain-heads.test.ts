import t from 'tap'
import { CHAIN_MAX_TENANTS, createChainHeads } from '../../src/audit/chain-heads.js'
import { chainReceipts, draft, EMPTY_HEAD, type ReceiptDraft } from '../../src/core/receipt.js'

let n = 0
const d = (tenantId = 'ten_a'): ReceiptDraft =>
  draft({ receiptId: `rcp_${++n}`, tenantId, kind: 'CHECK', decision: 'ALLOW', createdAt: 1 })
const stored = (tenantId: string) => chainReceipts(EMPTY_HEAD, [d(tenantId)]).receipts

t.test('plans chain from the learned head, and the next plan from where the last will end', async (t) => {
  const heads = createChainHeads()
  t.equal(heads.plan([d()]), null, 'an unknown tenant: no plan')
  const [first] = stored('ten_a')
  heads.learn([first!])
  const one = heads.plan([d(), d()])
  t.same(one?.batches[0]?.from, { seq: 1, hash: first!.hash })
  t.equal(one?.batches[0]?.to.seq, 3)
  const two = heads.plan([d()])
  t.same(two?.batches[0]?.from, one?.batches[0]?.to, 'chained on from the batch still in flight')
  heads.learn([first!])
  t.equal(heads.plan([d()])?.batches[0]?.from.seq, 4, 'learning an older receipt moves nothing back')
  const dup = d()
  t.equal(heads.plan([dup, dup]), null, 'a receiptId twice: no plan')
})

t.test('a miss backs the tenant off, unless this process moved the head itself since the plan', async (t) => {
  let now = 0
  const heads = createChainHeads({ nowMs: () => now, backOffMs: 1000 })
  const [a] = stored('ten_a')
  const [b] = stored('ten_b')
  heads.learn([a!, b!])
  const plan = heads.plan([d('ten_a'), d('ten_b')])!
  heads.forget(['ten_b']) // e.g. an appendWith moved ten_b's head while the plan was in flight
  heads.missed(plan, ['ten_a', 'ten_b'])
  t.notOk(heads.knows('ten_a'))
  t.notOk(heads.knows('ten_b'))
  heads.learn([a!, b!])
  t.notOk(heads.knows('ten_a'), 'ten_a backs off: not relearned')
  t.ok(heads.knows('ten_b'), 'ten_b: relearned at once')
  now = 999
  heads.learn([a!])
  t.notOk(heads.knows('ten_a'))
  now = 1000
  heads.learn([a!])
  t.ok(heads.knows('ten_a'), 'relearned once the back-off is over')
})

t.test(`at most ${CHAIN_MAX_TENANTS} tenants: past it the oldest is dropped, the rest kept`, async (t) => {
  const heads = createChainHeads()
  for (let i = 0; i <= CHAIN_MAX_TENANTS; i++) heads.learn(stored(`ten_${i}`))
  t.notOk(heads.knows('ten_0'), 'the first one remembered is dropped')
  let known = 0
  for (let i = 1; i <= CHAIN_MAX_TENANTS; i++) if (heads.knows(`ten_${i}`)) known++
  t.equal(known, CHAIN_MAX_TENANTS, 'every other tenant is still known')
})
