import { request } from 'node:http'
import t from 'tap'
import { startBillingProxy } from '../helpers/billing-proxy.js'
import { agentRequest, agentRequestExpectingContinue } from '../helpers/proxy.js'

t.test('gate-proxy in the single-process default', async (t) => {
  const { upstream, api, cp, tenant: o, agent, port } = await startBillingProxy(t)

  t.test('probes', async (t) => {
    t.equal((await agentRequest(port, { method: 'GET', path: '/healthz' })).status, 200)
    t.same((await agentRequest(port, { method: 'GET', path: '/readyz' })).json(), { ready: true })
  })

  t.test(
    'ALLOW: forwarded with the injected credential, the agent credential stripped, and a receipt header',
    async (t) => {
      const before = upstream.received.length
      const r = await agentRequest(port, {
        method: 'POST',
        path: '/sys_billing/v1/verify?x=1',
        headers: {
          'content-type': 'application/json',
          authorization: 'Bearer agent-own',
          'x-writegate-grant': 'grt_x',
        },
        body: '{"a":1}',
      })
      t.equal(r.status, 200)
      t.same(r.json(), { ok: true })
      t.match(r.headers['x-writegate-receipt'], /^rcp_/)
      const got = upstream.received[before]
      t.match(got, { method: 'POST', url: '/v1/verify?x=1' })
      t.equal(got?.headers.authorization, 'Bearer up-secret', 'the injected credential, not the agent one')
      t.equal(
        got?.headers['x-writegate-receipt'],
        r.headers['x-writegate-receipt'],
        'the upstream learns the authorising receipt',
      )
      t.equal(got?.headers['x-writegate-grant'], undefined)
      t.equal(got?.body.toString(), '{"a":1}')
      const rows = await cp.database!.sql<
        { body: string }[]
      >`select body from receipts where receipt_id = ${r.headers['x-writegate-receipt'] as string}`
      t.match(JSON.parse(rows[0]!.body), {
        kind: 'CHECK',
        decision: 'ALLOW',
        verb: 'verify',
        keyId: agent.keyId,
        detail: {
          via: 'proxy',
          systemId: 'sys_billing',
          request: { method: 'POST', path: '/v1/verify?x=1' },
        },
      })
    },
  )

  t.test('DENY (403) and require_grant: the upstream is not contacted', async (t) => {
    const before = upstream.received.length
    const r = await agentRequest(port, { method: 'POST', path: '/sys_billing/v1/provision/vm-9', body: '{}' })
    t.equal(r.status, 403)
    t.match(r.json(), { decision: 'DENY', verb: 'provision', reason: 'grant_required', receiptId: /^rcp_/ })
    t.equal(upstream.received.length, before)
    const g = await api.post('/v1/grants', { verb: 'provision', target: 'vm-9' }, { bearer: o.sponsorToken })
    const allowed = await agentRequest(port, {
      method: 'POST',
      path: '/sys_billing/v1/provision/vm-9',
      body: '{}',
    })
    t.equal(allowed.status, 200, 'the grant (target from the route template) lets one through')
    t.equal(upstream.received.length, before + 1)
    const rows = await cp.database!.sql<
      { body: string }[]
    >`select body from receipts where receipt_id = ${allowed.headers['x-writegate-receipt'] as string}`
    t.match(JSON.parse(rows[0]!.body), {
      target: 'vm-9',
      reason: 'grant_consumed',
      detail: { grantId: g.body.grantId },
    })
    t.equal(
      (await agentRequest(port, { method: 'POST', path: '/sys_billing/v1/provision/vm-9', body: '{}' }))
        .status,
      403,
      'single use',
    )
  })

  t.test('STEP_UP (428): staged as a pending action with the exact request', async (t) => {
    const before = upstream.received.length
    const r = await agentRequest(port, {
      method: 'POST',
      path: '/sys_billing/v1/refunds',
      headers: { 'content-type': 'application/json' },
      body: '{"charge":"ch_1","amount":500}',
    })
    t.equal(r.status, 428)
    const body = r.json()
    t.match(body, { decision: 'STEP_UP', verb: 'refund', actionId: /^act_/, receiptId: /^rcp_/ })
    t.equal(upstream.received.length, before)
    const actions = await cp.database!.sql<
      { tool: string; params: Record<string, string> }[]
    >`select tool, params from pending_actions where id = ${body.actionId}`
    t.equal(actions[0]?.tool, '@http')
    t.match(actions[0]?.params, { method: 'POST', path: '/v1/refunds', contentType: 'application/json' })
    t.equal(
      Buffer.from(actions[0]!.params.body as string, 'base64').toString(),
      '{"charge":"ch_1","amount":500}',
    )
    const staged = await cp.database!.sql<
      { body: string }[]
    >`select body from receipts where tenant_id = ${o.tenantId} and kind = 'ACTION_STAGED'`
    t.equal(staged.length, 1)
    t.notMatch(staged[0]!.body, /ch_1/, 'the audit log keeps a digest, not the body')
  })

  t.test('STEP_UP with Expect: 100-continue: the proxy asks for the body, and stages it', async (t) => {
    const before = upstream.received.length
    const r = await agentRequestExpectingContinue(
      port,
      '/sys_billing/v1/refunds',
      '{"charge":"ch_2","amount":7}',
    )
    t.match(r, { status: 428, continued: true, sentBody: true })
    t.equal(upstream.received.length, before)
    const { actionId } = JSON.parse(r.reply)
    const actions = await cp.database!.sql<
      { params: Record<string, string> }[]
    >`select params from pending_actions where id = ${actionId}`
    t.equal(
      Buffer.from(actions[0]!.params.body as string, 'base64').toString(),
      '{"charge":"ch_2","amount":7}',
    )
  })

  t.test('reads pass ungated; unmapped writes and gated reads are refused', async (t) => {
    const before = upstream.received.length
    t.equal((await agentRequest(port, { method: 'GET', path: '/sys_billing/v1/anything' })).status, 200)
    t.equal(upstream.received.length, before + 1)
    const w = await agentRequest(port, { method: 'PATCH', path: '/sys_billing/v1/anything', body: '{}' })
    t.same([w.status, w.json().reason], [403, 'unmapped_route'])
    t.equal(upstream.received.length, before + 1)
    const mappedRead = await agentRequest(port, { method: 'GET', path: '/sys_billing/v1/secret-report' })
    t.equal(mappedRead.status, 200, 'a read named by a route is gated like a write (verify: allow)')
    t.match(mappedRead.headers['x-writegate-receipt'], /^rcp_/)
  })

  t.test('an upstream cannot set x-writegate-receipt: only a decision does', async (t) => {
    const normal = upstream.behaviour
    t.teardown(() => {
      upstream.behaviour = normal
    })
    upstream.behaviour = (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'x-writegate-receipt': 'rcp_forged' })
      res.end('{"ok":true}')
    }
    const read = await agentRequest(port, { method: 'GET', path: '/sys_billing/v1/anything' })
    t.equal(read.status, 200)
    t.equal(read.headers['x-writegate-receipt'], undefined, 'an ungated read carries none')
    const write = await agentRequest(port, { method: 'POST', path: '/sys_billing/v1/verify', body: '{}' })
    t.equal(write.status, 200)
    const receiptId = write.headers['x-writegate-receipt'] as string
    t.match(receiptId, /^rcp_/)
    t.not(receiptId, 'rcp_forged', 'a gated write carries its own receipt')
    const rows = await cp.database!.sql`select 1 from receipts where receipt_id = ${receiptId}`
    t.equal(rows.length, 1)
  })

  t.test('forward mode (absolute URI) and transparent mode (Host header)', async (t) => {
    const before = upstream.received.length
    const f = await agentRequest(port, { method: 'POST', path: `${upstream.origin}/v1/verify`, body: 'x' })
    t.equal(f.status, 200)
    t.equal(upstream.received[before]?.url, '/v1/verify')
    const tr = await agentRequest(port, {
      method: 'POST',
      path: '/v1/verify',
      headers: { host: `127.0.0.1:${upstream.port}` },
      body: 'y',
    })
    t.equal(tr.status, 200)
    t.equal(upstream.received[before + 1]?.body.toString(), 'y')
    const stranger = await agentRequest(port, {
      method: 'POST',
      path: 'http://evil.example:8080/v1/verify',
      body: 'x',
    })
    t.same([stranger.status, stranger.json().code], [403, 'not_enrolled'])
    // The same request redirected transparently (origin-form, Host names the stranger).
    const redirected = await agentRequest(port, {
      method: 'POST',
      path: '/v1/verify',
      headers: { host: 'evil.example:8080' },
      body: 'x',
    })
    t.same([redirected.status, redirected.json()], [stranger.status, stranger.json()])
    t.equal((await agentRequest(port, { method: 'POST', path: '/sys_nope/v1/verify' })).status, 403)
    t.equal(upstream.received.length, before + 2)
  })

  t.test('paths the upstream could read differently are refused', async (t) => {
    const before = upstream.received.length
    for (const path of [
      '/sys_billing/v1/refunds/../verify',
      '/sys_billing/v1/%2e%2e/verify',
      '/sys_billing/v1/verify%2f..',
      '/sys_billing//v1/verify',
      '/sys_billing/v1\\verify',
    ]) {
      const r = await agentRequest(port, { method: 'POST', path, body: '{}' })
      t.equal(r.status, 400, path)
    }
    t.equal(upstream.received.length, before)
  })

  t.test('CONNECT is refused unless the host is on the pass-through list', async (t) => {
    const status = await new Promise<number>((resolve, reject) => {
      const req = request({ host: '127.0.0.1', port, method: 'CONNECT', path: 'api.example.com:443' })
      req.on('connect', (res, socket) => {
        socket.destroy()
        resolve(res.statusCode ?? 0)
      })
      req.on('error', reject)
      req.end()
    })
    t.equal(status, 403)
  })
})
