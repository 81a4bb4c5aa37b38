import type { IncomingMessage } from 'node:http'
import t from 'tap'
import { ERRORS } from '../../src/core/errors.js'
import { NO_LOCAL_SYSTEMS, planProxyRequest } from '../../src/proxy/request-plan.js'
import { parseTarget } from '../../src/proxy/request-target.js'
import { snapshotWithSystems } from '../helpers/snapshots.js'

const snap = snapshotWithSystems('ten_a', [
  {
    systemId: 'sys_ours',
    kind: 'http' as const,
    tenantId: 'ten_a',
    version: 1,
    createdAt: 0,
    updatedAt: 0,
    upstream: 'http://upstream.test:8080',
    reads: 'pass',
    routes: [{ method: 'POST', path: '/v1/verify', verb: 'verify' }],
    tools: [],
  },
])

/** The proxy's answer before any decision: a refusal of the target itself, or of the system it names. */
function refusalOf(url: string, host: string | undefined) {
  const target = parseTarget(req(url, host))
  if (!target.ok) return { ok: false, status: target.def.status, error: target.error, code: target.def.code }
  const plan = planProxyRequest(snap, NO_LOCAL_SYSTEMS, target, 'POST', false)
  if (plan.kind === 'settle' && plan.context.kind === 'refused')
    return {
      ok: false,
      status: plan.context.def.status,
      error: plan.context.error,
      code: plan.context.def.code,
    }
  return { ok: true }
}

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
    t.same(refusalOf(url, host), { ok: false, ...expected }, url)
    t.equal(codes.get(expected.code), expected.status, `${expected.code} is in the registry with its status`)
  }
})

t.test('an enrolled system resolves in each mode', async (t) => {
  for (const [url, host, mode] of [
    ['/sys_ours/v1/verify', undefined, 'reverse'],
    ['http://upstream.test:8080/v1/verify', undefined, 'forward'],
    ['/v1/verify', 'upstream.test:8080', 'transparent'],
  ] as const) {
    const target = parseTarget(req(url, host))
    t.match(target, { ok: true, path: '/v1/verify', mode }, url)
    if (!target.ok) continue
    t.match(planProxyRequest(snap, NO_LOCAL_SYSTEMS, target, 'POST', false), {
      kind: 'decide',
      verb: 'verify',
      systemId: 'sys_ours',
    })
  }
})

t.test("inside an intercepted tunnel the authority is the tunnel's", async (t) => {
  const tunnel = { host: 'api.example.com', port: 8443 }
  t.same(parseTarget(req('/v1/verify', 'api.example.com:8443'), tunnel), {
    ok: true,
    mode: 'transparent',
    hostname: 'api.example.com',
    port: 8443,
    path: '/v1/verify',
    tunnel: true,
  })
  // The TLS port knows only the SNI: the Host's port names the system, else 443.
  const sniOnly = { host: 'api.example.com', port: null }
  t.match(parseTarget(req('/v1/verify', 'API.example.com:9443'), sniOnly), {
    mode: 'transparent',
    hostname: 'api.example.com',
    port: 9443,
    tunnel: true,
  })
  t.match(parseTarget(req('/v1/verify', 'api.example.com'), sniOnly), { port: 443, tunnel: true })
  t.match(parseTarget(req('https://api.example.com:8443/v1/verify?x=1'), tunnel), {
    ok: true,
    mode: 'forward',
    hostname: 'api.example.com',
    port: 8443,
    path: '/v1/verify?x=1',
    tunnel: true,
  })
  t.match(
    parseTarget(req('/sys_ours/v1/verify', 'api.example.com:8443'), tunnel),
    { mode: 'transparent', path: '/sys_ours/v1/verify' },
    "a /sys_x/ path is the upstream's own",
  )
  t.match(parseTarget(req('https://other.example.com/v1/verify'), tunnel), {
    ok: false,
    def: ERRORS.misdirectedRequest,
  })
  const outside = parseTarget(req('/v1/verify', 'api.example.com:8443'))
  t.notOk('tunnel' in outside, 'a request outside a tunnel carries no tunnel mark')
})
