import t from 'tap'
import { startBillingProxy } from '../helpers/billing-proxy.js'
import { agentRequest } from '../helpers/proxy.js'

/** Headers (and a query parameter) frameworks honour to run another method or path than the one sent. */
const OVERRIDES: Record<string, string> = {
  'x-http-method-override': 'DELETE',
  'x-http-method': 'DELETE',
  'x-method-override': 'DELETE',
  'x-original-url': '/v1/customers/cus_1',
  'x-rewrite-url': '/v1/customers/cus_1',
  'x-forwarded-host': 'admin.internal',
  'x-forwarded-proto': 'https',
  'x-forwarded-prefix': '/admin',
  'x-forwarded-for': '10.0.0.1',
  forwarded: 'for=10.0.0.1;host=admin.internal;proto=https',
}

t.test('method and path overrides never reach the upstream', async (t) => {
  const { upstream, port } = await startBillingProxy(t)

  t.test('override headers are stripped from gated writes and ungated reads', async (t) => {
    const before = upstream.received.length
    const write = await agentRequest(port, {
      method: 'POST',
      path: '/sys_billing/v1/verify',
      headers: { ...OVERRIDES, 'x-normal': 'kept' },
      body: '{}',
    })
    t.equal(write.status, 200, 'ALLOWed as verify')
    const read = await agentRequest(port, {
      method: 'GET',
      path: '/sys_billing/v1/anything',
      headers: { ...OVERRIDES, 'x-normal': 'kept' },
    })
    t.equal(read.status, 200)
    const got = upstream.received.slice(before)
    t.same(
      got.map((r) => [r.method, r.url]),
      [
        ['POST', '/v1/verify'],
        ['GET', '/v1/anything'],
      ],
    )
    for (const r of got) {
      for (const name of Object.keys(OVERRIDES))
        t.equal(r.headers[name], undefined, `${r.method}: ${name} not sent upstream`)
      t.equal(r.headers['x-normal'], 'kept', `${r.method}: other headers are`)
    }
  })

  t.test('a _method query parameter is refused (400), in any spelling', async (t) => {
    const before = upstream.received.length
    for (const [method, query] of [
      ['POST', '?_method=DELETE'],
      ['POST', '?a=1&_method=DELETE'],
      ['POST', '?a=1;_method=DELETE'],
      ['POST', '?%5Fmethod=DELETE'],
      ['POST', '?_METHOD=delete'],
      ['GET', '?_method=DELETE'],
      // As PHP registers them (found in review): Symfony and Laravel read each as _method.
      ['POST', '?.method=DELETE'],
      ['POST', '?[method=DELETE'],
      ['POST', '?+.method=DELETE'],
      ['POST', '?%20.method=DELETE'],
      ['POST', '?_method[]=DELETE'],
    ] as const) {
      const path = `/sys_billing/v1/${method === 'POST' ? 'verify' : 'anything'}${query}`
      const r = await agentRequest(port, { method, path, ...(method === 'POST' ? { body: '{}' } : {}) })
      t.same([r.status, r.json().code], [400, 'method_override'], `${method} ${query}`)
    }
    t.equal(upstream.received.length, before, 'the upstream received none of them')
    const similar = await agentRequest(port, {
      method: 'POST',
      path: '/sys_billing/v1/verify?method=x&my_method=y',
      body: '{}',
    })
    t.equal(similar.status, 200, 'other parameters are not mistaken for it')
  })

  t.test(
    'an override header spelled with underscores is stripped too (CGI reads it as dashes)',
    async (t) => {
      const before = upstream.received.length
      const underscored = {
        x_http_method_override: 'DELETE',
        'x-http-method_override': 'DELETE',
        x_forwarded_host: 'evil.example',
        x_original_url: '/v1/refunds',
        proxy_authorization: 'Basic eA==',
      }
      const r = await agentRequest(port, {
        method: 'POST',
        path: '/sys_billing/v1/verify',
        headers: { ...underscored, x_normal_header: 'kept' },
        body: '{}',
      })
      t.equal(r.status, 200)
      const [got] = upstream.received.slice(before)
      for (const name of Object.keys(underscored))
        t.equal(got?.headers[name], undefined, `${name} not sent upstream`)
      t.equal(got?.headers.x_normal_header, 'kept', 'another underscored header is')
    },
  )
})
