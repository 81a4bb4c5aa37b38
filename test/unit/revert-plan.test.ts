import t from 'tap'
import { fillTemplate, fillText } from '../../src/actions/param-template.js'
import { planRevert } from '../../src/actions/revert-plan.js'
import { toolRequest } from '../../src/actions/tool-request.js'
import { billingSystems } from '../helpers/enrolled-systems.js'
import { registryOver } from '../helpers/snapshots.js'

t.test('templates read params and the upstream answer; a lone placeholder keeps its type', async (t) => {
  const scope = { params: { charge: 'ch_1', n: 3 }, result: { id: 42, data: { ref: 'r-9' } } }
  t.same(fillTemplate('{result.id}', scope), { ok: true, value: 42 })
  t.same(fillTemplate('{result.data}', scope), { ok: true, value: { ref: 'r-9' } })
  t.same(fillTemplate('{charge}', scope), { ok: true, value: 'ch_1' })
  t.same(fillTemplate('{params.n}', scope), { ok: true, value: 3 })
  t.same(fillTemplate('{charge}:{result.data.ref}', scope), { ok: true, value: 'ch_1:r-9' })
  t.same(fillTemplate('{result.missing}', scope), { ok: false, missing: 'result.missing' })
  t.same(fillTemplate('x-{result.data}', scope), { ok: false, missing: 'result.data' }, 'no objects in text')
  t.same(fillTemplate('{result.id}', { params: {}, result: 'not json' }), { ok: false, missing: 'result.id' })
  t.same(fillTemplate('{result.constructor}', { params: {}, result: {} }), {
    ok: false,
    missing: 'result.constructor',
  })
  t.equal(fillText('{charge}', scope), 'ch_1')
  t.equal(fillText('{nope}', scope), null)
})

t.test('the undo of a tool: the revert tool, params filled and validated', async (t) => {
  const systems = await registryOver(billingSystems('ten_a', 'http://127.0.0.1:1'), 'ten_a')
  const issue = (await systems.tool('ten_a', 'issue_refund'))!
  const plan = await planRevert(systems, issue, { charge: 'ch_1', amount: 5 }, { id: 're_1' })
  t.match(plan, { kind: 'planned', params: { refund: 're_1' } })
  t.same(plan.kind === 'planned' && plan.ref.tool.name, 'cancel_refund')
  t.match(await planRevert(systems, issue, {}, { status: 'ok' }), {
    kind: 'impossible',
    problem: 'result.id is missing for refund',
  })
  t.match(await planRevert(systems, issue, {}, { id: 7 }), {
    kind: 'impossible',
    problem: /refund: must be string/,
  })
  t.same(await planRevert(systems, (await systems.tool('ten_a', 'cancel_refund'))!, {}, {}), { kind: 'none' })
})

t.test('tool requests: path from params, the rest as the body (or query for GET)', async (t) => {
  const systems = await registryOver(billingSystems('ten_a', 'http://127.0.0.1:1'), 'ten_a')
  const cancel = (await systems.tool('ten_a', 'cancel_refund'))!.tool
  t.same(toolRequest(cancel, { refund: 're_1' }), {
    ok: true,
    method: 'POST',
    path: '/v1/refunds/re_1/cancel',
    body: undefined,
  })
  const issue = (await systems.tool('ten_a', 'issue_refund'))!.tool
  t.match(toolRequest(issue, { charge: 'ch_1', amount: 5 }), { body: { charge: 'ch_1', amount: 5 } })
  const get = { ...cancel, method: 'GET' as const, pathTemplate: '/v1/refunds/{refund}' }
  t.same(toolRequest(get, { refund: 're_1', expand: ["a'b"], limit: 3 }), {
    ok: true,
    method: 'GET',
    path: '/v1/refunds/re_1?expand=%5B%22a%27b%22%5D&limit=3',
    body: undefined,
  })
  t.match(toolRequest(cancel, { refund: '../admin' }), { ok: false })
})
