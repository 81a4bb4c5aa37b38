import t from 'tap'
import { unfitPayload } from '../../src/audit/queued-payload.js'
import { draft } from '../../src/core/receipt.js'

const good = draft({
  receiptId: 'rcp_1',
  tenantId: 'ten_a',
  kind: 'CHECK',
  decision: 'ALLOW',
  createdAt: 1_764_000_000,
  verb: 'refund',
  policyVersion: 3,
  detail: { via: 'proxy' },
})
const payload = (receipt: unknown, actions: unknown[] = []) => ({ receipts: [receipt], actions })
const action = {
  actionId: 'act_1',
  tenantId: 'ten_a',
  systemId: 'sys_billing',
  tool: '@http',
  params: { method: 'POST', path: '/v1/refunds', body: 'eyJhIjoxfQ==' },
  verb: 'refund',
  target: 'ch_1',
  environment: null,
  principalId: 'prn_1',
  keyId: 'key_1',
  stagedReceiptId: 'rcp_1',
  createdAt: 1_764_000_000,
  expiresAt: 1_764_086_400,
}

t.test('a payload as proxies queue it is fit, JSON round trip included', async (t) => {
  t.equal(unfitPayload('ten_a', payload(good)), null)
  t.equal(unfitPayload('ten_a', JSON.parse(JSON.stringify(payload(good)))), null)
  t.equal(unfitPayload('ten_a', payload(good, [action])), null)
  t.equal(unfitPayload('ten_a', JSON.parse(JSON.stringify(payload(good, [action])))), null)
  t.equal(unfitPayload('ten_a', payload(good, [{ ...action, systemVersion: 4 }])), null, 'a system version')
  t.equal(
    unfitPayload('ten_a', payload(good, [{ ...action, systemVersion: null }])),
    null,
    'none (a routes file)',
  )
  t.equal(
    unfitPayload('ten_a', payload({ ...good, target: 'emoji \ud83d\ude00 paired' })),
    null,
    'a paired surrogate is text',
  )
})

t.test("every way a queued payload cannot go into its tenant's log is named", async (t) => {
  const cases: [string, unknown, RegExp][] = [
    ['no payload', null, /not an object/],
    ['no lists', { receipts: {} }, /not a list/],
    ['a receipt that is no object', payload('x'), /receipt is not an object/],
    ["another tenant's receipt", payload({ ...good, tenantId: 'ten_b' }), /another tenant/],
    ['no receiptId', payload({ ...good, receiptId: '' }), /without a receiptId/],
    ['an unknown kind', payload({ ...good, kind: 'NOPE' }), /unknown kind/],
    ['an unknown decision', payload({ ...good, decision: 'MAYBE' }), /unknown decision/],
    ['a createdAt that is text', payload({ ...good, createdAt: '0,"seq":1' }), /createdAt/],
    ['a createdAt that is fractional', payload({ ...good, createdAt: 1.5 }), /createdAt/],
    ['a negative createdAt', payload({ ...good, createdAt: -1 }), /createdAt/],
    ['a policyVersion that is text', payload({ ...good, policyVersion: '3' }), /policyVersion/],
    ['a keyId that is a number', payload({ ...good, keyId: 5 }), /keyId is not a string/],
    ['a detail that is a list', payload({ ...good, detail: [] }), /detail/],
    [
      'an action of another tenant',
      payload(good, [{ ...action, tenantId: 'ten_b' }]),
      /action of another tenant/,
    ],
    // Found in review: each of these passed, then failed in Postgres with the good entries read alongside.
    ['a member of its own (hash)', payload({ ...good, hash: 'x' }), /unknown member hash/],
    ['a member of its own (type)', payload({ ...good, type: 'receipt' }), /unknown member type/],
    ['a NUL in keyId', payload({ ...good, keyId: 'key_\u0000x' }), /cannot store/],
    ['a lone surrogate in target', payload({ ...good, target: 'ch_\ud800' }), /cannot store/],
    ['a NUL deep in detail', payload({ ...good, detail: { a: [{ b: 'x\u0000' }] } }), /cannot store/],
    ['an action of only a tenant', payload(good, [{ tenantId: 'ten_a' }]), /without its actionId/],
    [
      'an action without a systemId',
      payload(good, [{ ...action, systemId: undefined }]),
      /without its systemId/,
    ],
    ['an action whose params is text', payload(good, [{ ...action, params: 'x' }]), /params/],
    ['an action with a text expiresAt', payload(good, [{ ...action, expiresAt: '1' }]), /expiresAt/],
    ['a text systemVersion', payload(good, [{ ...action, systemVersion: '4' }]), /systemVersion/],
    ['a systemVersion of 0', payload(good, [{ ...action, systemVersion: 0 }]), /systemVersion/],
    ['a systemVersion past integer', payload(good, [{ ...action, systemVersion: 2 ** 31 }]), /systemVersion/],
    [
      'a NUL in an action param key',
      payload(good, [{ ...action, params: { 'a\u0000': 1 } }]),
      /cannot store/,
    ],
  ]
  for (const [name, p, reason] of cases) t.match(unfitPayload('ten_a', p), reason, name)
})
