import fc from 'fast-check'
import t from 'tap'
import { canonicalJson } from '../../src/core/jcs.js'
import { chainReceipts, draft, EMPTY_HEAD } from '../../src/core/receipt.js'
import { chainHash, GENESIS_HASH } from '../../src/core/receipt-chain.js'

t.test('RFC 8785 examples: member order, numbers and escapes', async (t) => {
  // Appendix/§3.2.2-style cases: keys sorted by UTF-16 code units, ES number form.
  t.equal(canonicalJson({ b: 1, a: 2 }), '{"a":2,"b":1}')
  t.equal(
    canonicalJson({
      '\u20ac': 'Euro Sign',
      '\r': 'Carriage Return',
      '\ufb33': 'Hebrew Letter Dalet With Dagesh',
      '1': 'One',
      '\ud83d\ude00': 'Emoji: Grinning Face',
      '\u0080': 'Control',
      '\u00f6': 'Latin Small Letter O With Diaeresis',
    }),
    '{"\\r":"Carriage Return","1":"One","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis","\u20ac":"Euro Sign","\ud83d\ude00":"Emoji: Grinning Face","\ufb33":"Hebrew Letter Dalet With Dagesh"}',
  )
  t.equal(
    // RFC 8785 §3.2.2.3 sample; the literal is meant to round.
    // biome-ignore lint/correctness/noPrecisionLoss: the RFC's own sample value
    canonicalJson([1e21, 1e-7, -0, 0.000001, 333333333.33333329, 4.5]),
    '[1e+21,1e-7,0,0.000001,333333333.3333333,4.5]',
  )
  t.equal(canonicalJson({ a: undefined, b: null, c: [undefined] }), '{"b":null,"c":[null]}')
  t.equal(canonicalJson('\u2028\u0000"'), '"\u2028\\u0000\\""')
  t.throws(() => canonicalJson({ n: Number.NaN }))
})

t.test('canonical form is independent of member insertion order', async (t) => {
  fc.assert(
    fc.property(fc.dictionary(fc.string(), fc.jsonValue()), (obj) => {
      const reversed = Object.fromEntries(Object.entries(obj).reverse())
      return canonicalJson(obj) === canonicalJson(reversed)
    }),
  )
  fc.assert(
    fc.property(fc.jsonValue(), (v) => canonicalJson(JSON.parse(canonicalJson(v))) === canonicalJson(v)),
  )
  t.pass('properties hold')
})

/** The plain reading of RFC 8785 (sorted keys, JSON.stringify leaves): the oracle for the fast serializer. */
function referenceJcs(value: unknown): string {
  if (Array.isArray(value))
    return `[${value.map((v) => (v === undefined ? 'null' : referenceJcs(v))).join(',')}]`
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined)
    entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${referenceJcs(v)}`).join(',')}}`
  }
  return JSON.stringify(value)
}

t.test('the serializer agrees with the reference reading, escapes and surrogates included', async (t) => {
  const text = fc.string({ unit: 'binary' })
  const json = fc.letrec((tie) => ({
    value: fc.oneof(
      { depthSize: 'small' },
      text,
      fc.double({ noNaN: true, noDefaultInfinity: true }),
      fc.boolean(),
      fc.constant(null),
      fc.array(tie('value')),
      fc.dictionary(text, tie('value')),
    ),
  })).value
  fc.assert(
    fc.property(json, (v) => canonicalJson(v) === referenceJcs(v)),
    { numRuns: 2000 },
  )
  t.equal(
    canonicalJson({ '\ud800': '\udfff', 'a"b': 'c\\d', '\u007f': '\u2028' }),
    referenceJcs({ '\ud800': '\udfff', 'a"b': 'c\\d', '\u007f': '\u2028' }),
  )
  t.pass('agrees')
})

t.test('keys: quoted alike past the quote cache, long ones and ones needing escapes included', async (t) => {
  // Keys are quoted once and kept (short ones, up to a bound): the same text either way.
  const many = Object.fromEntries(Array.from({ length: 5000 }, (_, i) => [`k${i}"\u0001`, i]))
  const long = { ['x'.repeat(100_000)]: 1, [`${'y'.repeat(70)}"`]: 2, short: 3 }
  for (const v of [many, long, many, long]) t.equal(canonicalJson(v), referenceJcs(v))
  t.equal(canonicalJson({ b: 1, a: { d: 1, c: 2 } }), '{"a":{"c":2,"d":1},"b":1}', 'sorted, nested')
  t.equal(canonicalJson({ a: 1, b: { c: 1, d: 2 } }), '{"a":1,"b":{"c":1,"d":2}}', 'already sorted')
})

t.test('receipt chain: seq runs 1..n, each prevHash is the previous hash', async (t) => {
  const drafts = [1, 2, 3].map((i) =>
    draft({ receiptId: `rcp_${i}`, tenantId: 'ten_a', kind: 'CHECK', createdAt: 100 + i, decision: 'ALLOW' }),
  )
  const { receipts, head } = chainReceipts(EMPTY_HEAD, drafts)
  t.same(
    receipts.map((r) => r.seq),
    [1, 2, 3],
  )
  t.equal(receipts[0]?.prevHash, GENESIS_HASH)
  t.equal(receipts[1]?.prevHash, receipts[0]?.hash)
  t.equal(head.hash, receipts[2]?.hash)
  const { hash, ...body } = receipts[1]!
  t.equal(
    chainHash(receipts[0]!.hash, body),
    hash,
    'hash = sha256(prevHash + "\\n" + JCS(receipt without hash))',
  )
  const tampered = { ...body, decision: 'DENY' as const }
  t.not(chainHash(receipts[0]!.hash, tampered), hash)
})
