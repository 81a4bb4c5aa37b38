import fc from 'fast-check'
import t from 'tap'
import { canonicalJson } from '../../src/core/jcs.js'
import {
  BODY_MEMBERS,
  chainReceipts,
  draft,
  EMPTY_HEAD,
  RECEIPT_KINDS,
  type ReceiptDraft,
} from '../../src/core/receipt.js'
import { chainHash } from '../../src/core/receipt-chain.js'

// chainReceipts writes a plain draft's body member by member (BODY_MEMBERS) instead of through
// canonicalJson: these tests hold that text to canonicalJson's for the same body, since the
// stored text is what the chain's hash covers and what a verifier recomputes.

const nullableString = fc.option(fc.string({ unit: 'binary' }), { nil: null })
const jsonValue = fc.jsonValue({ maxDepth: 3 })

const plainDraft = fc.record({
  receiptId: fc.string({ unit: 'binary', minLength: 1 }),
  tenantId: fc.string({ unit: 'binary', minLength: 1 }),
  kind: fc.constantFrom(...RECEIPT_KINDS),
  decision: fc.constantFrom('ALLOW', 'DENY', 'STEP_UP', 'REVOKE', null),
  verb: nullableString,
  requestedVerb: nullableString,
  target: nullableString,
  environment: nullableString,
  principalId: nullableString,
  principalName: nullableString,
  keyId: nullableString,
  reason: nullableString,
  policyVersion: fc.option(fc.integer(), { nil: null }),
  detail: fc.dictionary(fc.string({ unit: 'binary' }), jsonValue, { maxKeys: 6 }),
  createdAt: fc.integer({ min: 0 }),
}) as fc.Arbitrary<ReceiptDraft>

/** What the generic path stores: the whole body through canonicalJson. */
function genericBodies(drafts: readonly ReceiptDraft[]): string[] {
  const bodies: string[] = []
  let prev = EMPTY_HEAD.hash
  drafts.forEach((d, i) => {
    const body = { ...d, seq: i + 1, prevHash: prev }
    bodies.push(canonicalJson(body))
    prev = chainHash(prev, body)
  })
  return bodies
}

t.test("the members are a receipt body's, in code-unit order", async (t) => {
  const full = chainReceipts(EMPTY_HEAD, [
    draft({ receiptId: 'r', tenantId: 't', kind: 'CHECK', createdAt: 1 }),
  ])
  const { hash: _hash, ...body } = full.receipts[0]!
  t.same([...BODY_MEMBERS], Object.keys(body).sort(), 'every member of a body, and only those')
  t.same([...BODY_MEMBERS], [...BODY_MEMBERS].sort(), 'sorted as JCS sorts (UTF-16 code units)')
})

t.test("a plain draft's body text is exactly canonicalJson's (property)", async (t) => {
  t.doesNotThrow(() =>
    fc.assert(
      fc.property(fc.array(plainDraft, { minLength: 1, maxLength: 4 }), (drafts) => {
        const { bodies, receipts } = chainReceipts(EMPTY_HEAD, drafts)
        const expected = genericBodies(drafts)
        if (bodies.join('\n') !== expected.join('\n')) return false
        // The receipt returned is the body parsed back plus its hash: nothing gained or lost.
        return receipts.every((r, i) => {
          const { hash, ...rest } = r
          return canonicalJson(rest) === bodies[i] && hash === chainHash(r.prevHash, rest)
        })
      }),
      { numRuns: 500 },
    ),
  )
})

t.test('members the generic path treats specially are treated the same', async (t) => {
  const base = draft({ receiptId: 'r1', tenantId: 't1', kind: 'CHECK', createdAt: 5 })
  const cases: [string, ReceiptDraft][] = [
    ['an undefined member is left out', { ...base, verb: undefined as unknown as null }],
    ['an unsorted detail is sorted', { ...base, detail: { z: 1, a: { y: [2, { c: 1, b: 0 }], x: null } } }],
    ['strings that need escaping', { ...base, target: '"\\\u0000\u2028\ud800', reason: '\ud83d\ude00' }],
    ['numbers in ECMAScript form', { ...base, createdAt: 1e21, policyVersion: -0 }],
  ]
  for (const [name, d] of cases) {
    t.equal(chainReceipts(EMPTY_HEAD, [d]).bodies[0], genericBodies([d])[0], name)
  }
  t.throws(
    () => chainReceipts(EMPTY_HEAD, [{ ...base, detail: { n: Number.POSITIVE_INFINITY } }]),
    TypeError,
    'a value JCS cannot express is refused, as by canonicalJson',
  )
})

t.test('a draft with a member of its own takes the generic path, member kept', async (t) => {
  const d = { ...draft({ receiptId: 'r1', tenantId: 't1', kind: 'CHECK', createdAt: 5 }), extra: 'kept' }
  const { bodies, receipts } = chainReceipts(EMPTY_HEAD, [d])
  t.equal(bodies[0], genericBodies([d])[0])
  t.match(bodies[0], /"extra":"kept"/)
  t.equal((receipts[0] as unknown as Record<string, unknown>).extra, 'kept')
})

t.test('a draft missing a member takes the generic path', async (t) => {
  const { verb: _verb, ...d } = draft({ receiptId: 'r1', tenantId: 't1', kind: 'CHECK', createdAt: 5 })
  const { bodies } = chainReceipts(EMPTY_HEAD, [d as ReceiptDraft])
  t.equal(bodies[0], genericBodies([d as ReceiptDraft])[0])
  t.notMatch(bodies[0], /"verb"/)
})

t.test(
  'an inherited member makes a draft not plain: only own members are hashed, as a spread copies',
  async (t) => {
    const { verb: _verb, ...own } = draft({ receiptId: 'r1', tenantId: 't1', kind: 'CHECK', createdAt: 5 })
    const d = Object.assign(Object.create({ verb: 'inherited' }), own) as ReceiptDraft
    const { bodies } = chainReceipts(EMPTY_HEAD, [d])
    t.equal(bodies[0], genericBodies([d])[0])
    t.notMatch(bodies[0], /inherited/)
  },
)

t.test('a member behind a getter is read once: the receipt returned is the one hashed', async (t) => {
  let reads = 0
  const d = draft({ receiptId: 'r1', tenantId: 't1', kind: 'CHECK', createdAt: 5 })
  Object.defineProperty(d, 'target', { enumerable: true, get: () => `read-${++reads}` })
  const { bodies, receipts } = chainReceipts(EMPTY_HEAD, [d])
  const { hash, ...body } = receipts[0]!
  t.equal(canonicalJson(body), bodies[0])
  t.equal(chainHash(body.prevHash, body), hash)
})

t.test(
  'draft() gives every member: missing or undefined ones null, detail {}, extra ones kept',
  async (t) => {
    const d = draft({
      receiptId: 'r1',
      tenantId: 't1',
      kind: 'CHECK',
      createdAt: 5,
      verb: 'refund',
      reason: undefined,
    })
    t.same(Object.keys(d).sort(), [...BODY_MEMBERS].filter((k) => k !== 'seq' && k !== 'prevHash').sort())
    t.equal(d.verb, 'refund')
    t.equal(d.reason, null, 'given as undefined: null, so canonical JSON keeps the member')
    t.equal(d.target, null)
    t.same(d.detail, {})
    const extra = draft({ receiptId: 'r1', tenantId: 't1', kind: 'CHECK', createdAt: 5, ...{ note: 'kept' } })
    t.equal((extra as unknown as Record<string, unknown>).note, 'kept', 'as the copy it replaced kept it')
  },
)
