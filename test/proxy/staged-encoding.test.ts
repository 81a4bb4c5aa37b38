import { gzipSync } from 'node:zlib'
import t from 'tap'
import { startBillingProxy } from '../helpers/billing-proxy.js'
import { agentRequest } from '../helpers/proxy.js'

/**
 * Found in review: a STEP_UP write with a compressed body was replayed without its
 * Content-Encoding, so the upstream got gzip bytes labelled as JSON. The action keeps the
 * header, the approver is told, and the replay sends both, as an ALLOW forwards them.
 */
t.test('a staged write keeps its content encoding: shown, and replayed with its bytes', async (t) => {
  const bench = await startBillingProxy(t)
  const body = gzipSync('{"charge":"ch_gz"}')
  const staged = await agentRequest(bench.port, {
    method: 'POST',
    path: '/sys_billing/v1/refunds',
    headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' },
    body,
  })
  t.equal(staged.status, 428, 'staged for approval')
  const actionId = staged.json().actionId as string
  const shown = await bench.api.get(`/v1/agent/actions/${actionId}`, { bearer: bench.tenant.apiKey })
  t.match(shown.body.request, { contentEncoding: 'gzip', bodyEncoding: 'binary', bodyBytes: body.length })
  const approved = await bench.approve(actionId)
  t.same([approved.status, approved.body.type], [200, 'executed'], JSON.stringify(approved.body))
  const sent = bench.upstream.received.at(-1)
  t.equal(sent?.headers['content-encoding'], 'gzip')
  t.same(sent?.body, body, 'the bytes as staged')
})
