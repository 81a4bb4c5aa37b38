import t from 'tap'
import { API_BACKENDS } from '../helpers/backends.js'
import { startControlPlane } from '../helpers/control-plane.js'
import { selfSigned } from '../helpers/self-signed.js'

const billing = (over: Record<string, unknown> = {}) => ({
  systemId: 'sys_billing',
  upstream: 'https://billing.example.com',
  credential: { header: 'authorization', prefix: 'Bearer ', fromEnv: 'BILLING_TOKEN' },
  reads: 'pass',
  routes: [
    { method: 'POST', path: '/v1/refunds', verb: 'refund' },
    { method: 'POST', path: '/v1/customers/{customer}/credits', verb: 'verify', target: '{customer}' },
  ],
  tools: [],
  ...over,
})

/** The billing system with one tool whose params schema is `params`. */
const withParams = (params: Record<string, unknown>) =>
  billing({ tools: [{ name: 'bad', verb: 'verify', method: 'POST', pathTemplate: '/x', params }] })

for (const kind of API_BACKENDS) {
  t.test(`enrolled systems as a resource on ${kind}`, async (t) => {
    const { api, cp } = await startControlPlane(t, kind, {
      settings: { systems: { allowPrivateUpstreams: false } },
    })
    const receipts = async (tenantId: string, k: string) =>
      (
        await cp.database!.sql<
          { body: string }[]
        >`select body from receipts where tenant_id = ${tenantId} and kind = ${k} order by seq`
      ).map((r) => JSON.parse(r.body))
    const tenantVersion = async (tenantId: string) =>
      Number(
        (await cp.database!.sql<{ v: number }[]>`select version as v from tenants where id = ${tenantId}`)[0]
          ?.v,
      )

    t.test('create, read, list: version 1, a SYSTEM_CREATE receipt, the tenant version moves', async (t) => {
      const o = await api.newTenant()
      const before = await tenantVersion(o.tenantId)
      const r = await api.post('/v1/systems', billing(), { bearer: o.apiKey })
      t.equal(r.status, 201)
      t.match(r.body, {
        systemId: 'sys_billing',
        tenantId: o.tenantId,
        version: 1,
        upstream: 'https://billing.example.com',
        credential: { header: 'authorization', prefix: 'Bearer ', fromEnv: 'BILLING_TOKEN' },
        reads: 'pass',
        createdAt: Number,
        updatedAt: Number,
      })
      t.equal(await tenantVersion(o.tenantId), before + 1, 'decision state: the tenant version moved')
      t.same((await api.get('/v1/systems/sys_billing', { bearer: o.apiKey })).body, r.body)
      const list = await api.get('/v1/systems', { bearer: o.apiKey })
      t.same(list.body, { tenantId: o.tenantId, systems: [r.body] })
      const [created] = await receipts(o.tenantId, 'SYSTEM_CREATE')
      t.match(created, {
        kind: 'SYSTEM_CREATE',
        target: 'sys_billing',
        keyId: o.keyId,
        policyVersion: before + 1,
        detail: {
          systemId: 'sys_billing',
          version: 1,
          routes: 2,
          routesSha256: /^[0-9a-f]{64}$/,
          credential: { header: 'authorization', fromEnv: 'BILLING_TOKEN' },
        },
      })
    })

    t.test('agent keys get 403, no key 401, as for policies', async (t) => {
      const o = await api.newTenant()
      const agent = await api.post('/v1/keys', { email: o.email, scope: 'agent' }, { bearer: o.apiKey })
      for (const [method, url] of [
        ['POST', '/v1/systems'],
        ['GET', '/v1/systems'],
        ['GET', '/v1/systems/sys_billing'],
        ['PUT', '/v1/systems/sys_billing'],
        ['DELETE', '/v1/systems/sys_billing'],
      ] as const) {
        const body = method === 'POST' || method === 'PUT' ? billing() : undefined
        const r = await api.call(method, url, body, { bearer: agent.body.apiKey })
        t.same([r.status, r.body.code], [403, 'insufficient_scope'], `${method} ${url} (agent)`)
        const anon = await api.call(method, url, body)
        t.same([anon.status, anon.body.code], [401, 'unknown_api_key'], `${method} ${url} (no key)`)
      }
    })

    t.test('validation: one clear 400 per problem, naming the field; nothing is stored', async (t) => {
      const o = await api.newTenant()
      const cases: [Record<string, unknown>, number, string, RegExp][] = [
        [
          billing({
            routes: [
              { method: 'POST', path: '/v1/customers/{customer}', verb: 'verify', target: '{custmer}' },
            ],
          }),
          400,
          'invalid_request',
          /routes\.0\.target: placeholder \{custmer\} is not defined by the path/,
        ],
        [
          billing({ upstream: 'billing.example.com' }),
          400,
          'invalid_request',
          /upstream: expected an origin such as/,
        ],
        [
          billing({ upstream: 'https://billing.example.com/api' }),
          400,
          'invalid_request',
          /upstream: expected an origin: scheme, host and port only/,
        ],
        [
          billing({ upstream: 'ftp://billing.example.com' }),
          400,
          'invalid_request',
          /upstream: expected an https:\/\/ or http:\/\/ origin/,
        ],
        [
          billing({
            routes: [
              { method: 'POST', path: '/v1/a/{x}', verb: 'verify' },
              { method: 'POST', path: '/V1/A/{y}/', verb: 'refund' },
            ],
          }),
          400,
          'invalid_request',
          /routes\.1: duplicate route/,
        ],
        [
          billing({ routes: [{ method: 'POST', path: '/v1/x', verb: 'made.up' }] }),
          400,
          'unknown_verb',
          /routes\.0\.verb: made\.up is not in the tenant's vocabulary/,
        ],
        [billing({ systemId: 'billing' }), 400, 'invalid_request', /systemId: expected sys_<name>/],
        [billing({ systemId: `sys_${'x'.repeat(61)}` }), 400, 'invalid_request', /systemId/],
        [
          billing({ upstream: 'http://127.0.0.1:9000' }),
          400,
          'private_upstream',
          /upstream: 127\.0\.0\.1 is a loopback/,
        ],
        [
          billing({ upstream: 'http://169.254.169.254' }),
          400,
          'private_upstream',
          /upstream: 169\.254\.169\.254/,
        ],
        [billing({ upstream: 'http://[::1]:80' }), 400, 'private_upstream', /loopback/],
        [billing({ upstream: 'http://metadata.localhost' }), 400, 'private_upstream', /loopback/],
        [
          billing({ credential: { header: 'authorization', value: 'sk_live_x' } }),
          400,
          'invalid_request',
          /credential/,
        ],
        [
          billing({ credential: { header: 'authorization', fromEnv: 'A', fromFile: '/x' } }),
          400,
          'invalid_request',
          /set exactly one of fromEnv or fromFile/,
        ],
        [
          billing({ credential: { header: 'authorization', fromFile: 'relative/path' } }),
          400,
          'invalid_request',
          /credential\.fromFile: expected an absolute path/,
        ],
        [billing({ tenantId: 'ten_other' }), 400, 'invalid_request', /tenantId/],
        [
          withParams({ type: 'nonsense' }),
          400,
          'invalid_request',
          /tools\.0\.params: not a valid JSON Schema/,
        ],
        [
          // Patterns run on RE2 (linear time), which has no lookaround or backreferences.
          withParams({ type: 'object', properties: { a: { type: 'string', pattern: '^(?=a)a' } } }),
          400,
          'invalid_request',
          /tools\.0\.params: not a valid JSON Schema: .*unsupported Perl syntax/,
        ],
        [
          // Found in review: answered with ajv's stack overflow ("Maximum call stack size exceeded").
          withParams({ $defs: { x: { $ref: '#/$defs/x' } }, $ref: '#/$defs/x' }),
          400,
          'invalid_request',
          /tools\.0\.params: not a valid JSON Schema: a \$ref refers back to itself/,
        ],
        // Found in review: each compiled, then crashed the process ($async), broke another
        // tenant's tool ($id), or held the event loop for seconds (uniqueItems, size, depth).
        [
          withParams({ $async: true, type: 'object', properties: { id: { type: 'string', maxLength: 3 } } }),
          400,
          'invalid_request',
          /tools\.0\.params: not a valid JSON Schema: \$async is not supported/,
        ],
        [
          withParams({ $id: 'https://example.com/shared.json', type: 'object' }),
          400,
          'invalid_request',
          /\$id is not supported/,
        ],
        [
          withParams({ type: 'object', properties: { a: { type: 'array', uniqueItems: true } } }),
          400,
          'invalid_request',
          /uniqueItems is not supported/,
        ],
        [
          withParams({
            type: 'object',
            properties: Object.fromEntries(
              Array.from({ length: 1_001 }, (_, i) => [`p${i}`, { type: 'string' }]),
            ),
          }),
          400,
          'invalid_request',
          /more than 1000 objects/,
        ],
        [
          withParams(
            Array.from({ length: 17 }).reduce<Record<string, unknown>>(
              (inner) => ({ type: 'object', properties: { a: inner } }),
              { type: 'string' },
            ),
          ),
          400,
          'invalid_request',
          /nested deeper than 32 levels/,
        ],
        [
          billing({ routes: [{ method: 'POST', path: '/v1/{a}-{b}', verb: 'verify' }] }),
          400,
          'invalid_request',
          /routes\.0\.path: a path pattern may hold at most one \{placeholder\} per segment/,
        ],
        // Found in review: a bundle that only looked like PEM was enrolled.
        [
          billing({ caBundle: '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----' }),
          400,
          'invalid_request',
          /caBundle: certificate 1 of the bundle is not a readable X\.509 certificate/,
        ],
        [
          billing({
            caBundle: `${selfSigned('billing.example.com').pem}\n-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----`,
          }),
          400,
          'invalid_request',
          /caBundle: certificate 2 of the bundle/,
        ],
      ]
      for (const [body, status, code, error] of cases) {
        const r = await api.post('/v1/systems', body, { bearer: o.apiKey })
        t.same([r.status, r.body.code], [status, code], JSON.stringify(body).slice(0, 120))
        t.match(r.body.error, error)
      }
      t.same((await api.get('/v1/systems', { bearer: o.apiKey })).body.systems, [], 'nothing was enrolled')
      t.same(await receipts(o.tenantId, 'SYSTEM_CREATE'), [])
    })

    t.test("a tool's params pattern cannot hold the event loop, whatever the agent sends", async (t) => {
      const o = await api.newTenant()
      const tool = {
        name: 'tag',
        verb: 'verify',
        method: 'POST',
        pathTemplate: '/v1/tags',
        params: { type: 'object', properties: { a: { type: 'string', pattern: '(a+)+$' } } },
      }
      t.equal((await api.post('/v1/systems', billing({ tools: [tool] }), { bearer: o.apiKey })).status, 201)
      // On V8's backtracking engine this string alone took longer than the test's timeout.
      const check = (a: string) =>
        api.post('/v1/check', { verb: 'verify', tool: { name: 'tag', params: { a } } }, { bearer: o.apiKey })
      const refused = await check(`${'a'.repeat(50_000)}!`)
      t.same([refused.status, refused.body.code], [400, 'invalid_params'])
      t.equal((await check('aaa')).body.decision, 'ALLOW')
    })

    t.test(
      'ids: taken is 409, a deleted id is never reused, a tool name belongs to one system',
      async (t) => {
        const o = await api.newTenant()
        t.equal((await api.post('/v1/systems', billing(), { bearer: o.apiKey })).status, 201)
        const again = await api.post('/v1/systems', billing(), { bearer: o.apiKey })
        t.same([again.status, again.body.code], [409, 'system_exists'])
        const tool = { name: 'issue_refund', verb: 'refund', method: 'POST', pathTemplate: '/v1/refunds' }
        t.equal(
          (await api.post('/v1/systems', billing({ systemId: 'sys_a', tools: [tool] }), { bearer: o.apiKey }))
            .status,
          201,
        )
        const clash = await api.post('/v1/systems', billing({ systemId: 'sys_b', tools: [tool] }), {
          bearer: o.apiKey,
        })
        t.same([clash.status, clash.body.code, clash.body.tool], [409, 'tool_taken', 'issue_refund'])
        const del = await api.delete('/v1/systems/sys_billing', { bearer: o.apiKey })
        t.same([del.status, del.body], [200, { systemId: 'sys_billing', deleted: true }])
        t.same((await api.get('/v1/systems/sys_billing', { bearer: o.apiKey })).body.code, 'system_not_found')
        const reuse = await api.post('/v1/systems', billing(), { bearer: o.apiKey })
        t.same([reuse.status, reuse.body.code, reuse.body.deleted], [409, 'system_exists', true])
        t.match(await receipts(o.tenantId, 'SYSTEM_DELETE'), [
          { target: 'sys_billing', detail: { version: 1 } },
        ])
        t.same(
          (await api.delete('/v1/systems/sys_billing', { bearer: o.apiKey })).status,
          404,
          'a second delete',
        )
      },
    )

    t.test("another tenant's system id behaves exactly like a missing one", async (t) => {
      const a = await api.newTenant()
      const b = await api.newTenant()
      t.equal((await api.post('/v1/systems', billing(), { bearer: b.apiKey })).status, 201)
      for (const [method, body] of [
        ['GET', undefined],
        ['PUT', billing()],
        ['DELETE', undefined],
      ] as const) {
        const theirs = await api.call(method, '/v1/systems/sys_billing', body, { bearer: a.apiKey })
        const missing = await api.call(
          method,
          '/v1/systems/sys_nowhere',
          body && { ...body, systemId: 'sys_nowhere' },
          {
            bearer: a.apiKey,
          },
        )
        t.equal(theirs.status, 404, method)
        t.same(theirs.body.code, missing.body.code, method)
        t.same(theirs.body.error, missing.body.error, method)
      }
      // Ids are per tenant: A may enrol its own sys_billing, and B's is untouched.
      t.equal((await api.post('/v1/systems', billing(), { bearer: a.apiKey })).status, 201)
      t.equal((await api.get('/v1/systems/sys_billing', { bearer: b.apiKey })).body.tenantId, b.tenantId)
    })

    t.test('replace: whole definition, version +1, ifVersion for optimistic concurrency', async (t) => {
      const o = await api.newTenant()
      await api.post('/v1/systems', billing(), { bearer: o.apiKey })
      const next = billing({ routes: [{ method: 'POST', path: '/v1/refunds', verb: 'verify' }] })
      const { systemId: _, ...definition } = next
      const r = await api.put(
        '/v1/systems/sys_billing',
        { ...definition, ifVersion: 1 },
        { bearer: o.apiKey },
      )
      t.equal(r.status, 200)
      t.match(r.body, { version: 2, routes: [{ method: 'POST', path: '/v1/refunds', verb: 'verify' }] })
      const stale = await api.put(
        '/v1/systems/sys_billing',
        { ...definition, ifVersion: 1 },
        { bearer: o.apiKey },
      )
      t.same([stale.status, stale.body.code, stale.body.version], [409, 'version_conflict', 2])
      const unconditional = await api.put('/v1/systems/sys_billing', definition, { bearer: o.apiKey })
      t.equal(unconditional.body.version, 3)
      const wrongId = await api.put(
        '/v1/systems/sys_billing',
        { ...definition, systemId: 'sys_x' },
        { bearer: o.apiKey },
      )
      t.same([wrongId.status, wrongId.body.code], [400, 'invalid_request'])
      const [update] = await receipts(o.tenantId, 'SYSTEM_UPDATE')
      const [created] = await receipts(o.tenantId, 'SYSTEM_CREATE')
      t.match(update.detail, { previousVersion: 1, version: 2, changed: ['routes', 'routesSha256'] })
      t.not(
        update.detail.routesSha256,
        created.detail.routesSha256,
        'the routes hash tells the versions apart',
      )
      const delStale = await api.delete('/v1/systems/sys_billing?ifVersion=2', { bearer: o.apiKey })
      t.same([delStale.status, delStale.body.code], [409, 'version_conflict'])
      t.equal((await api.delete('/v1/systems/sys_billing?ifVersion=3', { bearer: o.apiKey })).status, 200)
    })

    t.test('a route may name a custom verb (and its deprecated alias still resolves)', async (t) => {
      const o = await api.newTenant()
      await api.post('/v1/verbs', { name: 'billing.credit' }, { bearer: o.apiKey })
      const r = await api.post(
        '/v1/systems',
        billing({ routes: [{ method: 'POST', path: '/v1/credits', verb: 'billing.credit' }] }),
        { bearer: o.apiKey },
      )
      t.equal(r.status, 201)
    })
  })
}

t.test('limits: 100 systems per tenant, 500 routes per system', async (t) => {
  const { api } = await startControlPlane(t, 'fake')
  const o = await api.newTenant()
  const many = Array.from({ length: 501 }, (_, i) => ({ method: 'POST', path: `/v1/r${i}`, verb: 'verify' }))
  const tooMany = await api.post('/v1/systems', billing({ routes: many }), { bearer: o.apiKey })
  t.same([tooMany.status, tooMany.body.code], [400, 'invalid_request'])
  t.match(tooMany.body.error, /routes/)
  for (let i = 0; i < 100; i++) {
    const r = await api.post('/v1/systems', billing({ systemId: `sys_${i}`, credential: undefined }), {
      bearer: o.apiKey,
    })
    if (r.status !== 201) t.fail(`system ${i}: ${r.status}`)
  }
  const over = await api.post('/v1/systems', billing({ systemId: 'sys_100' }), { bearer: o.apiKey })
  t.same([over.status, over.body.code, over.body.limit], [409, 'system_limit_reached', 100])
})

t.test("limits: a tenant's systems hold 4 MiB of JSON together (found in review)", async (t) => {
  const { api } = await startControlPlane(t, 'fake')
  const o = await api.newTenant()
  // About 720 KB each: twelve tools with long descriptions in their params schemas.
  const big = (n: number) =>
    billing({
      systemId: `sys_big${n}`,
      credential: undefined,
      tools: Array.from({ length: 12 }, (_, i) => ({
        name: `tool_${n}_${i}`,
        verb: 'verify',
        method: 'POST',
        pathTemplate: '/v1/x',
        params: { type: 'object', description: 'd'.repeat(60_000) },
      })),
    })
  for (let n = 0; n < 5; n++)
    t.equal((await api.post('/v1/systems', big(n), { bearer: o.apiKey })).status, 201)
  const over = await api.post('/v1/systems', big(5), { bearer: o.apiKey })
  t.same([over.status, over.body.code, over.body.limit], [409, 'systems_size_limit_reached', 4 * 1024 * 1024])
  const grown = await api.put(
    '/v1/systems/sys_big0',
    { ...big(0), routes: big(0).routes },
    { bearer: o.apiKey },
  )
  t.equal(grown.status, 200, 'a system replaced is counted once')
  t.equal(
    (await api.get('/v1/systems', { bearer: o.apiKey })).body.systems.length,
    5,
    'nothing enrolled past it',
  )
})

t.test('private upstreams are allowed by default in the embedded default (no Redis)', async (t) => {
  const embedded = await startControlPlane(t, 'fake')
  const o = await embedded.api.newTenant()
  const loopback = billing({ upstream: 'http://127.0.0.1:9000' })
  t.equal((await embedded.api.post('/v1/systems', loopback, { bearer: o.apiKey })).status, 201)
})
