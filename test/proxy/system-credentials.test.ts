import { randomBytes } from 'node:crypto'
import { generate } from 'otplib'
import t from 'tap'
import { parseSettings } from '../../src/config/load.js'
import { startProxyProcess } from '../../src/proxy/proxy-process.js'
import { startRecordingServer } from '../helpers/enrolled-systems.js'
import { startFleet, waitForCount } from '../helpers/fleet.js'
import { agentRequest, capturingLogger, LOG_LEVEL, waitReady } from '../helpers/proxy.js'
import { billingSystems } from '../helpers/proxy-fixtures.js'

/**
 * Issue 15: a credential is a reference each injecting process resolves. Its value is never
 * sent to, stored by or published by the control plane: nothing in Postgres, Redis, receipts,
 * logs or API answers holds it, though every write the upstream received carried it.
 */
t.test('no secret value ever appears in Postgres, Redis, receipts, logs or API answers', async (t) => {
  const secret = `sk_live_${randomBytes(12).toString('hex')}`
  process.env.BILLING_TOKEN = secret
  const { logger, lines } = capturingLogger()
  const fleet = await startFleet(t, { proxies: 1, logger })
  // The proxies read their env from the fleet helper; the control plane (execute, approvals) from process.env.
  const proxy = await fleet.startProxy()
  const answers: unknown[] = []
  const admin = { bearer: fleet.tenant.apiKey }
  const keep = <T extends { body: unknown }>(r: T) => {
    answers.push(r.body)
    return r
  }
  // The proxy under test injects this process's secret: restart it with BILLING_TOKEN = secret.
  await proxy.close()
  const settings = parseSettings({
    redis: { url: fleet.redisUrl, keyPrefix: fleet.prefix },
    credentials: { allowEnv: ['BILLING_TOKEN'] },
    proxy: { port: 0, host: '127.0.0.1' },
    metrics: { port: 0, host: '127.0.0.1' },
  })
  const p = await startProxyProcess(settings, {
    env: { WRITEGATE_PROXY_API_KEY: fleet.agent.apiKey, BILLING_TOKEN: secret },
    clock: fleet.cp.clock,
    logger,
  })
  t.teardown(() => p.close())
  await waitReady(p)

  const allowed = await agentRequest(p.port, { method: 'POST', path: '/sys_billing/v1/verify', body: '{}' })
  answers.push(allowed.body.toString(), allowed.headers)
  const denied = await agentRequest(p.port, {
    method: 'POST',
    path: '/sys_billing/v1/provision/x',
    body: '{}',
  })
  answers.push(denied.body.toString(), denied.headers)
  const read = await agentRequest(p.port, { method: 'GET', path: '/sys_billing/v1/anything' })
  answers.push(read.body.toString())
  const staged = await agentRequest(p.port, {
    method: 'POST',
    path: '/sys_billing/v1/refunds',
    headers: { authorization: `Bearer ${secret}` }, // an agent that somehow holds it: stripped, staged without it
    body: '{"charge":"ch_1"}',
  })
  answers.push(staged.body.toString())
  t.same([allowed.status, denied.status, read.status, staged.status], [200, 403, 200, 428])
  const actionId = staged.json().actionId as string
  const pending = async () =>
    (
      await fleet.cp.database!.sql<
        { n: number }[]
      >`select count(*)::int as n from pending_actions where id = ${actionId}`
    )[0]?.n ?? 0
  await waitForCount(pending, 1)
  const code = await generate({
    secret: fleet.tenant.totp.secret,
    epoch: Math.floor(fleet.clock.nowMs() / 1000),
  })
  keep(await fleet.api.post(`/v1/agent/actions/${actionId}/approve`, { totpCode: code }, admin))
  const checked = keep(
    await fleet.api.post(
      '/v1/check',
      {
        verb: 'verify',
        request: { systemId: 'sys_billing', method: 'POST', path: '/v1/verify', body: { a: 1 } },
      },
      { bearer: fleet.agent.apiKey },
    ),
  )
  keep(
    await fleet.api.post(
      '/v1/execute',
      {
        systemId: 'sys_billing',
        method: 'POST',
        path: '/v1/verify',
        body: { a: 1 },
        leaseId: checked.body.leaseId,
      },
      { bearer: fleet.agent.apiKey },
    ),
  )
  keep(await fleet.api.get('/v1/systems', admin))
  keep(await fleet.api.get('/v1/systems/sys_billing', admin))
  const [system] = billingSystems(fleet.upstream.origin).systems
  const { systemId: _, tenantId: __, ...definition } = system ?? ({} as never)
  keep(await fleet.api.put('/v1/systems/sys_billing', { ...definition, reads: 'gate' }, admin))
  const receipts = keep(await fleet.api.get('/v1/receipts?limit=1000', admin))
  const exported = await fleet.cp.app.inject({
    method: 'GET',
    url: '/v1/receipts/export',
    headers: { authorization: `Bearer ${fleet.tenant.apiKey}` },
  })
  t.equal(exported.statusCode, 200)
  answers.push(exported.body)

  // The secret was in play: every write the upstream received carried it.
  const carried = fleet.upstream.received.filter((r) => r.headers.authorization === `Bearer ${secret}`)
  t.ok(
    carried.length >= 4,
    `the upstream received it ${carried.length} times (proxy ALLOW, read, approval, execute)`,
  )
  t.ok((receipts.body.receipts as unknown[]).length > 5)

  const hay: string[] = []
  // Postgres: every row of every table, as text.
  const tables = await fleet.cp.database!.sql<{ name: string }[]>`
    select table_name as name from information_schema.tables where table_schema = 'public'`
  for (const { name } of tables) {
    const rows = await fleet.cp.database!.sql.unsafe(`select t::text as row from "${name}" t`)
    for (const r of rows) hay.push(String((r as unknown as { row: string }).row))
  }
  // Redis: every key under the fleet's prefix, whatever its type.
  const redis = await import('ioredis').then((m) => new m.Redis(fleet.redisUrl))
  t.teardown(() => redis.quit())
  let cursor = '0'
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${fleet.prefix}*`, 'COUNT', 500)
    for (const key of keys) {
      const type = await redis.type(key)
      if (type === 'string') hay.push(String(await redis.get(key)))
      else if (type === 'hash') hay.push(JSON.stringify(await redis.hgetall(key)))
      else if (type === 'stream') hay.push(JSON.stringify(await redis.xrange(key, '-', '+')))
      else if (type === 'set') hay.push(JSON.stringify(await redis.smembers(key)))
      else if (type === 'zset') hay.push(JSON.stringify(await redis.zrange(key, 0, -1)))
      else if (type === 'list') hay.push(JSON.stringify(await redis.lrange(key, 0, -1)))
      hay.push(key)
    }
    cursor = next
  } while (cursor !== '0')
  t.ok(hay.length > 50, 'the scan read the stores')
  // The scan would find what is there: the allowed write's receipt id is in Postgres.
  t.ok(
    hay.join('\n').includes(String(allowed.headers['x-writegate-receipt'])),
    'control: a known value is found',
  )
  const found = (where: string, text: string) =>
    t.notOk(text.includes(secret), `${where} never holds the secret`)
  found('Postgres', hay.join('\n'))
  found('logs', JSON.stringify(lines))
  found('API answers', JSON.stringify(answers))
  t.ok(lines.length > 0, 'logs were captured')
})

t.test(
  'a process without the referenced secret: 503 credential_unavailable, /readyz and a metric say so',
  async (t) => {
    const upstream = await startRecordingServer(t)
    const fleet = await startFleet(t, { proxies: 0 })
    await fleet.api.post(
      '/v1/systems',
      {
        systemId: 'sys_other',
        upstream: upstream.origin,
        credential: { header: 'x-api-key', prefix: '', fromEnv: 'OTHER_TOKEN' },
        routes: [{ method: 'POST', path: '/v1/verify', verb: 'verify' }],
      },
      { bearer: fleet.tenant.apiKey },
    )
    const { logger, lines } = capturingLogger()
    const env: Record<string, string> = { WRITEGATE_PROXY_API_KEY: fleet.agent.apiKey, BILLING_TOKEN: 'b' }
    const settings = parseSettings({
      redis: { url: fleet.redisUrl, keyPrefix: fleet.prefix },
      // OTHER_TOKEN is allowed but not set; NOT_ALLOWED is set but not allowed.
      credentials: { allowEnv: ['BILLING_TOKEN', 'OTHER_TOKEN'], refreshSeconds: 1 },
      proxy: { port: 0, host: '127.0.0.1' },
      metrics: { port: 0, host: '127.0.0.1' },
    })
    const p = await startProxyProcess(settings, { env, clock: fleet.cp.clock, logger })
    t.teardown(() => p.close())
    await waitReady(p)

    const r = await agentRequest(p.port, { method: 'POST', path: '/sys_other/v1/verify', body: '{}' })
    t.same([r.status, r.json().code, r.json().systemId], [503, 'credential_unavailable', 'sys_other'])
    t.equal(r.headers['x-writegate-receipt'], undefined, 'nothing was decided')
    t.equal(upstream.requests.length, 0, 'nothing was sent')
    const ok = await agentRequest(p.port, { method: 'POST', path: '/sys_billing/v1/verify', body: '{}' })
    t.equal(ok.status, 200, "the other system's writes go on")

    const ready = (await agentRequest(p.port, { method: 'GET', path: '/readyz' })).json()
    t.match(ready, {
      ready: true,
      credentialsUnavailable: [
        { systemId: 'sys_other', problem: 'environment variable OTHER_TOKEN is not set' },
      ],
    })
    // A body-aware endpoint answers in its own terms: a JSON-RPC error per request, GraphQL errors.
    await fleet.api.post(
      '/v1/systems',
      {
        systemId: 'sys_tools',
        kind: 'mcp',
        upstream: upstream.origin,
        credential: { header: 'authorization', prefix: 'Bearer ', fromEnv: 'OTHER_TOKEN' },
        mcp: { endpoint: '/mcp', tools: [{ name: 'create_issue', verb: 'verify' }] },
      },
      { bearer: fleet.tenant.apiKey },
    )
    await fleet.api.post(
      '/v1/systems',
      {
        systemId: 'sys_graph',
        kind: 'graphql',
        upstream: upstream.origin,
        credential: { header: 'authorization', prefix: 'Bearer ', fromEnv: 'OTHER_TOKEN' },
        graphql: { endpoint: '/graphql', mutations: [{ field: 'createIssue', verb: 'verify' }] },
      },
      { bearer: fleet.tenant.apiKey },
    )
    let mcp = await agentRequest(p.port, { method: 'GET', path: '/readyz' })
    for (const deadline = Date.now() + 15_000; Date.now() < deadline; ) {
      mcp = await agentRequest(p.port, {
        method: 'POST',
        path: '/sys_tools/mcp',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 7,
          method: 'tools/call',
          params: { name: 'create_issue' },
        }),
      })
      // Until the proxy holds the new systems (404), and while two version bumps land (the
      // gate fails closed, 503 gate_unavailable, when a write's plan changes under it).
      const settling = mcp.status === 404 || (mcp.status === 503 && mcp.json().code === 'gate_unavailable')
      if (!settling) break
      await new Promise((r) => setTimeout(r, 25))
    }
    t.equal(mcp.status, 200)
    t.match(mcp.json(), {
      jsonrpc: '2.0',
      id: 7,
      error: { code: -32007, data: { code: 'credential_unavailable', systemId: 'sys_tools' } },
    })
    const gql = await agentRequest(p.port, {
      method: 'POST',
      path: '/sys_graph/graphql',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ query: 'mutation { createIssue(title: "x") }' }),
    })
    t.match(gql.json(), {
      errors: [{ extensions: { code: 'credential_unavailable', systemId: 'sys_graph' } }],
    })
    t.equal(upstream.requests.length, 0, 'nothing was sent')

    const metrics = await (await fetch(`http://127.0.0.1:${p.metricsPort}/metrics`)).text()
    t.match(metrics, /writegate_credential_unavailable\{system="sys_other",component="proxy"\} 1/)
    const warned = lines.filter((l) => l.level === LOG_LEVEL.warn && l.systemId === 'sys_other')
    t.equal(warned.length, 1, 'said once, not on every write')
    t.notOk(JSON.stringify(warned).includes('stack'), 'no stack trace')

    // Set it: within the refresh the system works, and the metric says so.
    env.OTHER_TOKEN = 'now-set'
    await new Promise((resolve) => setTimeout(resolve, 1100))
    const later = await agentRequest(p.port, { method: 'POST', path: '/sys_other/v1/verify', body: '{}' })
    t.equal(later.status, 200)
    t.equal(upstream.requests.at(-1)?.headers['x-api-key'], 'now-set')
    const after = await (await fetch(`http://127.0.0.1:${p.metricsPort}/metrics`)).text()
    t.match(after, /writegate_credential_unavailable\{system="sys_other",component="proxy"\} 0/)
  },
)
