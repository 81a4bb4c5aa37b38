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

t.test('a payload as proxies queue it is fit, JSON round trip included', async (t) => {
  t.equal(unfitPayload('ten_a', payload(good)), null)
  t.equal(unfitPayload('ten_a', JSON.parse(JSON.stringify(payload(good)))), null)
  t.equal(unfitPayload('ten_a', { receipts: [], actions: [{ tenantId: 'ten_a', actionId: 'act_1' }] }), null)
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
    ['an action of another tenant', payload(good, [{ tenantId: 'ten_b' }]), /action of another tenant/],
  ]
  for (const [name, p, reason] of cases) t.match(unfitPayload('ten_a', p), reason, name)
})
