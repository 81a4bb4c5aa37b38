import t from 'tap'
import { fillText } from '../../src/actions/param-template.js'
import { draft } from '../../src/core/receipt.js'

t.test('a draft has every field: one given as undefined is null', async (t) => {
  const d = draft({ receiptId: 'rcp_1', tenantId: 'ten_1', kind: 'CHECK', createdAt: 1, target: undefined })
  t.equal(d.target, null)
  t.ok(Object.hasOwn(d, 'target'), 'present, so canonical JSON keeps it')
  t.same(draft({ receiptId: 'r', tenantId: 't', kind: 'CHECK', createdAt: 1 }).detail, {})
  t.equal(draft({ receiptId: 'r', tenantId: 't', kind: 'CHECK', createdAt: 1, target: 'x' }).target, 'x')
})

t.test('a text template is text or null, never undefined', async (t) => {
  t.equal(fillText('{a}', { params: { a: { b: 1 } } }), '{"b":1}')
  t.equal(fillText('{a}', { params: { a: () => 1 } as Record<string, unknown> }), null)
  t.equal(fillText('{constructor}', { params: {} }), null, "a prototype's property is no param")
})
