import type { IncomingMessage } from 'node:http'
import t from 'tap'
import { ERRORS } from '../../src/core/errors.js'
import { NOT_ENROLLED, resolveTarget } from '../../src/proxy/request-target.js'
import { RouteTable } from '../../src/proxy/route-table.js'

const table = new RouteTable(
  {
    passthrough: [],
    systems: [
      {
        systemId: 'sys_ours',
        upstream: 'http://upstream.test:8080',
        reads: 'pass',
        routes: [{ method: 'POST', path: '/v1/verify', verb: 'verify' }],
        tools: [],
      },
    ],
  } as never,
  {},
  { upstreamTimeoutMs: 30_000 },
)
t.teardown(() => {
  for (const s of table.systems()) s.agent.destroy()
})

const req = (url: string, host = 'proxy.test') => ({ url, headers: { host } }) as unknown as IncomingMessage

t.test('every refusal is the registry code and status, with the exact wire text', async (t) => {
  const cases: [string, string | undefined, { status: number; error: string; code: string }][] = [
    ['http://[bad', undefined, { status: 400, error: 'malformed request target', code: 'invalid_request' }],
    [
      'http://user:pw@upstream.test:8080/v1/verify',
      undefined,
      { status: 400, error: 'credentials in the request target are not allowed', code: 'invalid_request' },
    ],
    [
      'http://elsewhere.test/v1/verify',
      undefined,
      {
        status: 403,
        error: 'not an enrolled system: writegate forwards only to enrolled upstreams',
        code: 'not_enrolled',
      },
    ],
    [
      '/sys_missing/v1/verify',
      undefined,
      {
        status: 403,
        error: 'not an enrolled system: writegate forwards only to enrolled upstreams',
        code: 'not_enrolled',
      },
    ],
    [
      '/v1/verify',
      'elsewhere.test',
      {
        status: 403,
        error: 'not an enrolled system: writegate forwards only to enrolled upstreams',
        code: 'not_enrolled',
      },
    ],
    [
      '/',
      '',
      {
        status: 403,
        error: 'not an enrolled system: writegate forwards only to enrolled upstreams',
        code: 'not_enrolled',
      },
    ],
    [
      '/sys_ours/v1/a/../verify',
      undefined,
      { status: 400, error: 'refused path: a dot segment', code: 'unsafe_path' },
    ],
    [
      '/sys_ours/v1/verify?_method=DELETE',
      undefined,
      {
        status: 400,
        error: 'a _method query parameter (method override) is not allowed',
        code: 'method_override',
      },
    ],
  ]
  const codes = new Map(Object.values(ERRORS).map((d) => [d.code, d.status]))
  for (const [url, host, expected] of cases) {
    const r = resolveTarget(req(url, host), table, null)
    t.same(r, { ok: false, ...expected }, url)
    t.equal(codes.get(expected.code), expected.status, `${expected.code} is in the registry with its status`)
  }
  t.same(NOT_ENROLLED, {
    ok: false,
    status: 403,
    error: 'not an enrolled system: writegate forwards only to enrolled upstreams',
    code: 'not_enrolled',
  })
})

t.test('an enrolled system resolves in each mode', async (t) => {
  t.match(resolveTarget(req('/sys_ours/v1/verify'), table, null), {
    ok: true,
    path: '/v1/verify',
    mode: 'reverse',
  })
  t.match(resolveTarget(req('http://upstream.test:8080/v1/verify'), table, null), {
    ok: true,
    path: '/v1/verify',
    mode: 'forward',
  })
  t.match(resolveTarget(req('/v1/verify', 'upstream.test:8080'), table, null), {
    ok: true,
    path: '/v1/verify',
    mode: 'transparent',
  })
})
