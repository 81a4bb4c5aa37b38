import t from 'tap'
import { startControlPlane, storedReceipts } from '../helpers/control-plane.js'
import { agentRequest, startEmbeddedProxy, waitReady } from '../helpers/proxy.js'
import { RecordingUpstream } from '../helpers/upstream.js'

/**
 * One control plane, two tenants, each enrolling systems on the same upstream host. The proxy
 * acts as tenant A's agent key: tenant B's systems are not in A's snapshot, so nothing reaches
 * the upstream with B's credential, nothing is decided under A's policy for it, and A's audit
 * chain records nothing of it.
 */
t.test("a proxy never reaches another tenant's system", async (t) => {
  const upstream = await new RecordingUpstream().start()
  t.teardown(() => upstream.close())
  const { api, cp } = await startControlPlane(t, 'fake')
  const a = await api.newTenant()
  const b = await api.newTenant()
  const agentA = await api.post('/v1/keys', { email: a.email, scope: 'agent' }, { bearer: a.apiKey })
  const system = (systemId: string, tokenEnv: string) => ({
    systemId,
    upstream: upstream.origin,
    credential: { header: 'authorization', prefix: 'Bearer ', fromEnv: tokenEnv },
    reads: 'pass' as const,
    routes: [{ method: 'POST' as const, path: '/v1/verify', verb: 'verify' }],
    tools: [],
  })
  // B's systems first, so a lookup by host that ignored the tenant would find them.
  const enrol = async (bearer: string, body: Record<string, unknown>) =>
    t.equal((await api.post('/v1/systems', body, { bearer })).status, 201)
  await enrol(b.apiKey, system('sys_theirs', 'B_TOKEN'))
  // An upstream host only B enrols (never contacted: nothing may reach it from A's proxy).
  await enrol(b.apiKey, { ...system('sys_theirs_only', 'B_TOKEN'), upstream: 'http://b-only.test:8080' })
  await enrol(a.apiKey, system('sys_ours', 'A_TOKEN'))
  const env = { WRITEGATE_PROXY_API_KEY: agentA.body.apiKey, A_TOKEN: 'a-secret', B_TOKEN: 'b-secret' }
  const settings = { credentials: { allowEnv: ['A_TOKEN', 'B_TOKEN'] } }
  const proxy = await startEmbeddedProxy(t, cp, null, env, {}, { settings })
  await waitReady(proxy)
  const port = proxy.port

  t.test("tenant B's system: 403 not_enrolled, for writes and ungated reads alike", async (t) => {
    for (const [method, path] of [
      ['POST', '/sys_theirs/v1/verify'],
      ['GET', '/sys_theirs/v1/anything'],
    ] as const) {
      const r = await agentRequest(port, { method, path, ...(method === 'POST' ? { body: '{}' } : {}) })
      t.same([r.status, r.json().code], [403, 'not_enrolled'], `${method} ${path}`)
      t.equal(r.headers['x-writegate-receipt'], undefined)
    }
    t.equal(upstream.received.length, 0, 'the upstream received nothing')
  })

  t.test("tenant B's system answers exactly as one that does not exist", async (t) => {
    const theirs = await agentRequest(port, { method: 'POST', path: '/sys_theirs/v1/verify', body: '{}' })
    const missing = await agentRequest(port, { method: 'POST', path: '/sys_nowhere/v1/verify', body: '{}' })
    t.same([theirs.status, theirs.json()], [missing.status, missing.json()])
  })

  t.test(
    "B's upstream host answers exactly as an unknown host, in forward and transparent mode",
    async (t) => {
      const before = upstream.received.length
      for (const method of ['POST', 'GET'] as const) {
        const body = method === 'POST' ? { body: '{}' } : {}
        const transparent = (host: string) =>
          agentRequest(port, { method, path: '/v1/verify', headers: { host }, ...body })
        const theirs = await transparent('b-only.test:8080')
        const unknown = await transparent('nowhere.test:8080')
        t.same([theirs.status, theirs.json().code], [403, 'not_enrolled'], `${method} transparent, B's host`)
        t.same([unknown.status, unknown.json()], [theirs.status, theirs.json()], `${method} transparent`)
        const forward = (host: string) =>
          agentRequest(port, { method, path: `http://${host}/v1/verify`, ...body })
        const theirsForward = await forward('b-only.test:8080')
        const unknownForward = await forward('nowhere.test:8080')
        t.same([theirsForward.status, theirsForward.json().code], [403, 'not_enrolled'])
        t.same([unknownForward.status, unknownForward.json()], [theirsForward.status, theirsForward.json()])
      }
      t.equal(upstream.received.length, before, 'nothing was forwarded')
    },
  )

  t.test("tenant A's own system on the same upstream still works, in every mode", async (t) => {
    const reverse = await agentRequest(port, { method: 'POST', path: '/sys_ours/v1/verify', body: '{}' })
    t.equal(reverse.status, 200)
    const forward = await agentRequest(port, {
      method: 'POST',
      path: `${upstream.origin}/v1/verify`,
      body: '{}',
    })
    t.equal(forward.status, 200, "forward mode picks A's system for the shared host")
    const transparent = await agentRequest(port, {
      method: 'GET',
      path: '/v1/anything',
      headers: { host: `127.0.0.1:${upstream.port}` },
    })
    t.equal(transparent.status, 200)
    t.same(
      upstream.received.map((r) => r.headers.authorization),
      ['Bearer a-secret', 'Bearer a-secret', 'Bearer a-secret'],
      "only A's credential ever went upstream",
    )
  })

  t.test("A's chain records only A's system; B's chain records nothing", async (t) => {
    const rows = [...(await storedReceipts(cp, a.tenantId)), ...(await storedReceipts(cp, b.tenantId))]
    const systems = rows.filter((r) => r.kind === 'CHECK').map((r) => [r.tenantId, r.detail?.systemId])
    t.same(systems, [
      [a.tenantId, 'sys_ours'],
      [a.tenantId, 'sys_ours'],
    ])
  })

  t.test(
    'until its key resolves, a proxy cannot tell whose a system is, or whether it is one: 503, even for reads',
    async (t) => {
      const before = upstream.received.length
      const unresolved = await startEmbeddedProxy(
        t,
        cp,
        null,
        // Well formed, but never issued: the key index never resolves it.
        { ...env, WRITEGATE_PROXY_API_KEY: `svc_${'x'.repeat(40)}` },
        {},
        { settings },
      )
      // A system nobody enrols answers alike: a 403 here would tell it apart from another tenant's.
      for (const path of ['/sys_theirs/v1/anything', '/sys_ours/v1/anything', '/sys_nobodys/v1/anything']) {
        const r = await agentRequest(unresolved.port, { method: 'GET', path })
        t.same([r.status, r.json().reason], [503, 'gate_unavailable'], path)
      }
      for (const host of ['nobody.example', '']) {
        const r = await agentRequest(unresolved.port, {
          method: 'POST',
          path: '/v1/x',
          headers: { host },
          body: '{}',
        })
        t.same(
          [r.status, r.json().reason],
          [503, 'gate_unavailable'],
          `transparent, host ${host || '(none)'}`,
        )
      }
      t.equal(upstream.received.length, before)
    },
  )
})
