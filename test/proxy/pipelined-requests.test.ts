import { connect } from 'node:net'
import t from 'tap'
import { startFleet } from '../helpers/fleet.js'

/** Sends `requests` in one write on one connection; resolves with all it reads until the proxy closes. */
function pipeline(port: number, requests: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = connect(port, '127.0.0.1', () => s.write(requests.join('')))
    let text = ''
    s.on('data', (d) => {
      text += d
    })
    s.on('error', reject)
    s.on('close', () => resolve(text))
    s.setTimeout(15_000, () => s.destroy(new Error('no close')))
  })
}

const post = (path: string, body: string, close = false) =>
  `POST /sys_billing${path} HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n${close ? 'connection: close\r\n' : ''}\r\n${body}`

const statuses = (text: string) => [...text.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1]))

/**
 * Node hands the proxy every pipelined request as soon as it is parsed. A refusal closes its
 * connection, and the writes pipelined behind it were still decided and sent upstream while
 * the agent never read their answers, and would retry them (found in review).
 */
t.test('pipelined writes: handled in order, none after an answer that closed the connection', async (t) => {
  // On Redis, as deployed: the refusal's commit and the next write's travel in one call.
  const fleet = await startFleet(t, { proxies: 1 })
  const { api, tenant, upstream } = fleet
  const port = fleet.proxies[0]?.port as number
  t.equal((await api.put('/v1/policy', { refund: 'deny' }, { bearer: tenant.apiKey })).status, 200)
  const sent = () => upstream.received.map((r) => `${r.method} ${r.url} ${r.body.toString('utf8')}`)

  const denied = await pipeline(port, [
    post('/v1/refunds', '{"a":1}'),
    post('/v1/verify', '{"n":"after-deny"}'),
  ])
  t.same(statuses(denied), [403], 'only the refusal is answered')
  t.same(sent(), [], 'and the write behind it never went upstream')

  t.equal((await api.put('/v1/policy', { refund: 'step_up' }, { bearer: tenant.apiKey })).status, 200)
  const stepped = await pipeline(port, [
    post('/v1/refunds', '{"a":2}'),
    post('/v1/verify', '{"n":"after-step-up"}'),
  ])
  t.same(statuses(stepped), [428], 'a STEP_UP closes the connection too')
  t.same(sent(), [], 'nothing behind it went upstream')

  // Writes that are answered on a kept-alive connection are all handled, in order.
  const allowed = await pipeline(port, [
    post('/v1/verify', '{"n":1}'),
    post('/v1/verify', '{"n":2}'),
    post('/v1/verify', '{"n":3}', true),
  ])
  t.same(statuses(allowed), [200, 200, 200], 'three ALLOWs, three answers')
  t.same(
    sent(),
    ['POST /v1/verify {"n":1}', 'POST /v1/verify {"n":2}', 'POST /v1/verify {"n":3}'],
    'sent upstream in the order they came',
  )
})
