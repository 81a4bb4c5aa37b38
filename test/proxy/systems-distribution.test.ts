import { generate } from 'otplib'
import t from 'tap'
import { parseSettings } from '../../src/config/load.js'
import { startProxyProcess } from '../../src/proxy/proxy-process.js'
import { startControlPlane } from '../helpers/control-plane.js'
import { startFleet, waitForCount } from '../helpers/fleet.js'
import { agentRequest } from '../helpers/proxy.js'
import { BILLING_CREDENTIALS, billingSystems } from '../helpers/proxy-fixtures.js'
import { waitFor } from '../helpers/wait.js'

/**
 * Issue 15: systems and routes are decision state. They reach an already-running proxy
 * through its tenant's snapshot, a route change is linearizable like a policy change, and a
 * staged write can be approved by a control plane that knows nothing but its database.
 * Real Postgres, real Redis, standalone proxies.
 */

t.test(
  'a tenant created at run time enrols a system; a running standalone proxy gates it, no restart',
  async (t) => {
    // A fleet whose own tenant is irrelevant here: it brings the control plane, Redis and an upstream.
    const fleet = await startFleet(t, { proxies: 0 })
    const tenant = await fleet.api.newTenant()
    const agent = await fleet.api.post(
      '/v1/keys',
      { email: tenant.email, scope: 'agent' },
      { bearer: tenant.apiKey },
    )
    const settings = parseSettings({
      redis: { url: fleet.redisUrl, keyPrefix: fleet.prefix },
      credentials: BILLING_CREDENTIALS,
      log: { level: 'silent' },
      proxy: { port: 0, host: '127.0.0.1' },
      metrics: { port: 0, host: '127.0.0.1' },
    })
    const proxy = await startProxyProcess(settings, {
      env: { WRITEGATE_PROXY_API_KEY: agent.body.apiKey, BILLING_TOKEN: 'run-time-secret' },
      clock: fleet.cp.clock,
    })
    t.teardown(() => proxy.close())
    const readyz = async () => (await agentRequest(proxy.port, { method: 'GET', path: '/readyz' })).json()
    await waitFor(async () => (await readyz()).reason === 'no_systems', 20_000, 'readiness to say no_systems')
    t.same(await readyz(), { ready: false, reason: 'no_systems' }, 'running, with nothing to gate yet')
    const before = await agentRequest(proxy.port, {
      method: 'POST',
      path: '/sys_billing/v1/verify',
      body: '{}',
    })
    t.same([before.status, before.json().code], [403, 'not_enrolled'])

    const [system] = billingSystems(fleet.upstream.origin).systems
    const enrolled = await fleet.api.post('/v1/systems', system, { bearer: tenant.apiKey })
    t.equal(enrolled.status, 201)
    // The enrolment answered after the snapshot was published: the very next write sees it.
    const r = await agentRequest(proxy.port, { method: 'POST', path: '/sys_billing/v1/verify', body: '{}' })
    t.equal(r.status, 200)
    t.match(r.headers['x-writegate-receipt'], /^rcp_/)
    t.equal(fleet.upstream.received.at(-1)?.headers.authorization, 'Bearer run-time-secret')
    t.same(await readyz(), { ready: true })
  },
)

t.test(
  '100 rounds, two proxies, pub/sub suppressed: a route remapped to a deny verb is DENY on the next write',
  async (t) => {
    const fleet = await startFleet(t, { proxies: 2, deaf: true })
    const [a, b] = fleet.proxies.map((p) => p.port) as [number, number]
    const admin = { bearer: fleet.tenant.apiKey }
    // A custom verb no layer sets resolves to deny.
    t.equal((await fleet.api.post('/v1/verbs', { name: 'billing.blocked' }, admin)).status, 201)
    const [system] = billingSystems(fleet.upstream.origin).systems
    if (!system) throw new Error('no system')
    const { systemId: _, tenantId: __, ...definition } = system
    const mapTo = (verb: string) =>
      fleet.api.put(
        '/v1/systems/sys_billing',
        { ...definition, routes: [{ method: 'POST', path: '/v1/remapped', verb }] },
        admin,
      )
    const write = (port: number) =>
      agentRequest(port, { method: 'POST', path: '/sys_billing/v1/remapped', body: '{}' })
    let stale = 0
    for (let i = 0; i < 100; i++) {
      t.equal((await mapTo('verify')).status, 200)
      const [okA, okB] = await Promise.all([write(a), write(b)])
      if (okA.status !== 200 || okB.status !== 200)
        t.fail(`round ${i}: mapped to verify, got ${okA.status}/${okB.status}`)
      const before = fleet.upstream.received.length
      t.equal((await mapTo('billing.blocked')).status, 200)
      const [dA, dB] = await Promise.all([write(a), write(b)])
      for (const d of [dA, dB]) {
        if (d.status !== 403 || d.json().verb !== 'billing.blocked' || d.json().decision !== 'DENY') {
          stale++
          t.fail(`round ${i}: after the remap ${d.status} ${d.body}`)
        }
      }
      if (fleet.upstream.received.length !== before)
        t.fail(`round ${i}: a write reached the upstream after the remap`)
    }
    t.equal(stale, 0, 'no write was decided under the old routes')
  },
)

t.test(
  'a proxy-staged STEP_UP write is approved by a control plane started from nothing but its database',
  async (t) => {
    process.env.BILLING_TOKEN = 'approval-secret'
    const fleet = await startFleet(t, { proxies: 1 })
    const proxy = fleet.proxies[0]!
    const staged = await agentRequest(proxy.port, {
      method: 'POST',
      path: '/sys_billing/v1/refunds',
      headers: { 'content-type': 'application/json' },
      body: '{"charge":"ch_1","amount":5}',
    })
    t.equal(staged.status, 428)
    const actionId = staged.json().actionId as string
    const pending = async () =>
      (
        await fleet.cp.database!.sql<
          { n: number }[]
        >`select count(*)::int as n from pending_actions where id = ${actionId}`
      )[0]?.n ?? 0
    t.equal(await waitForCount(pending, 1), 1, 'the drain stored the staged action')
    await fleet.cp.close()

    // A second control plane on the same database and Redis, given no systems and no routes file.
    const second = await startControlPlane(t, 'postgres', {
      db: fleet.db,
      clock: fleet.clock,
      keyring: fleet.keyring,
      settings: {
        redis: { url: fleet.redisUrl, keyPrefix: fleet.prefix },
        credentials: BILLING_CREDENTIALS,
      },
    })
    const code = await generate({
      secret: fleet.tenant.totp.secret,
      epoch: Math.floor(fleet.clock.nowMs() / 1000),
    })
    const before = fleet.upstream.received.length
    const r = await second.api.post(
      `/v1/agent/actions/${actionId}/approve`,
      { totpCode: code },
      { bearer: fleet.tenant.apiKey },
    )
    t.equal(r.status, 200, JSON.stringify(r.body))
    t.match(r.body, { type: 'executed', result: { status: 200 } })
    t.equal(fleet.upstream.received.length, before + 1)
    const sent = fleet.upstream.received.at(-1)
    t.same(
      [sent?.method, sent?.url, sent?.body.toString()],
      ['POST', '/v1/refunds', '{"charge":"ch_1","amount":5}'],
    )
    t.equal(sent?.headers.authorization, 'Bearer approval-secret')
  },
)
