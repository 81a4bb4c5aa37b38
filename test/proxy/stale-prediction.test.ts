import t, { type Test } from 'tap'
import { startFleet } from '../helpers/fleet.js'
import { agentRequest } from '../helpers/proxy.js'
import { waitFor } from '../helpers/wait.js'

/**
 * One deaf proxy (pub/sub suppressed) that has cached a snapshot deciding `verify` as `mode`
 * (its first write answered `status`); `flip` changes the policy behind its back.
 */
async function staleProxy(t: Test, mode: 'allow' | 'step_up', status: number) {
  const fleet = await startFleet(t, { proxies: 1, deaf: true })
  const port = fleet.proxies[0]?.port as number
  const admin = { bearer: fleet.tenant.apiKey }
  t.equal((await fleet.api.put('/v1/policy', { verify: mode }, admin)).status, 200)
  const first = await agentRequest(port, { method: 'POST', path: '/sys_billing/v1/verify', body: '{}' })
  t.equal(first.status, status, `the proxy has cached a snapshot that says ${mode}`)
  const flip = async (to: 'allow' | 'step_up') =>
    t.equal((await fleet.api.put('/v1/policy', { verify: to }, admin)).status, 200)
  return { fleet, port, admin, flip }
}

/**
 * The proxy reads a write's body before deciding when its cached snapshot predicts STEP_UP
 * (the body is staged with the action). If the tenant moved on and the commit decides ALLOW
 * instead, that already-read body must still be forwarded, not left hanging. Pub/sub is
 * suppressed so the proxy's snapshot is stale on purpose.
 */
t.test('a write predicted STEP_UP but decided ALLOW is forwarded with its body', async (t) => {
  const { fleet, port, flip } = await staleProxy(t, 'step_up', 428)
  await flip('allow')
  const before = fleet.upstream.received.length
  const body = '{"amount":42}'
  const reply = await Promise.race([
    agentRequest(port, { method: 'POST', path: '/sys_billing/v1/verify', body }),
    // A hang is what this catches; the bound is for a loaded machine.
    new Promise<null>((r) => setTimeout(() => r(null), 30_000).unref()),
  ])
  t.ok(reply, 'the proxy answered')
  t.equal(reply?.status, 200, 'decided under the new policy: ALLOW')
  t.ok(reply?.headers['x-writegate-receipt'], 'with its receipt')
  const got = fleet.upstream.received.slice(before)
  t.equal(got.length, 1, 'forwarded once')
  t.equal(got[0]?.body.toString('utf8'), body, 'with the body the proxy had already read')
})

/**
 * The same, for a request the new version lets through ungated: a DELETE with a body on an MCP
 * endpoint, routed as a write (so predicted STEP_UP, and its body read) under the proxy's stale
 * snapshot, passes as the end of a session once the route is gone. What was read must still go
 * upstream, not leave the upstream waiting for it.
 */
t.test('a request predicted STEP_UP that passes ungated under the new version keeps its body', async (t) => {
  const definition = { kind: 'http' as const, reads: 'pass' as const, tools: [] }
  const fleet = await startFleet(t, {
    proxies: 1,
    deaf: true,
    systems: (origin) => ({
      passthrough: [],
      systems: [
        {
          systemId: 'sys_reports',
          tenantId: 'ignored',
          upstream: origin,
          ...definition,
          routes: [{ method: 'GET', path: '/v1/report', verb: 'verify' }],
        },
      ],
    }),
  })
  const port = fleet.proxies[0]?.port as number
  const admin = { bearer: fleet.tenant.apiKey }
  t.equal((await fleet.api.put('/v1/policy', { verify: 'step_up' }, admin)).status, 200)
  const body = '{"reason":"done"}'
  // Node frames a GET's body only when told its length. (A read with a body: what passes
  // ungated with one; a DELETE at an MCP endpoint no longer does.)
  const end = {
    method: 'GET',
    path: '/sys_reports/v1/report',
    headers: { 'content-type': 'application/json', 'content-length': String(body.length) },
    body,
  }
  t.equal((await agentRequest(port, end)).status, 428, 'the proxy has cached a snapshot that routes the GET')

  const put = await fleet.api.put(
    '/v1/systems/sys_reports',
    { ...definition, upstream: fleet.upstream.origin, routes: [] },
    admin,
  )
  t.equal(put.status, 200, 'the route is gone')

  const before = fleet.upstream.received.length
  const reply = await Promise.race([
    agentRequest(port, end),
    // A hang is what this catches; the bound is for a loaded machine.
    new Promise<null>((r) => setTimeout(() => r(null), 30_000).unref()),
  ])
  t.ok(reply, 'the proxy answered')
  t.equal(reply?.status, 200, 'passed ungated under the new version')
  const got = fleet.upstream.received.slice(before)
  t.equal(got.length, 1, 'forwarded once')
  t.equal(got[0]?.method, 'GET')
  t.equal(got[0]?.body.toString('utf8'), end.body, 'with the body the proxy had already read')
})

/**
 * The other way round (found in review): predicted ALLOW, so its body was not read, and decided
 * STEP_UP once the commit found the snapshot stale. It was staged without its body, an action no
 * approver could ever approve (400 invalid_params). Now the body is read then, and staged.
 */
t.test('a write predicted ALLOW but decided STEP_UP is staged with its body', async (t) => {
  const { fleet, port, admin, flip } = await staleProxy(t, 'allow', 200)
  await flip('step_up')
  const before = fleet.upstream.received.length
  const body = '{"amount":42}'
  const staged = await agentRequest(port, { method: 'POST', path: '/sys_billing/v1/verify', body })
  t.equal(staged.status, 428, 'decided under the new policy: STEP_UP')
  const actionId = staged.json().actionId as string
  t.match(actionId, /^act_/)
  t.equal(fleet.upstream.received.length, before, 'nothing forwarded')
  // The proxy's staged action reaches the control plane through the receipt drain.
  let shown = await fleet.api.get(`/v1/agent/actions/${actionId}`, admin)
  await waitFor(
    async () => {
      shown = await fleet.api.get(`/v1/agent/actions/${actionId}`, admin)
      return shown.status === 200
    },
    30_000,
    'the staged action to be drained',
  )
  t.match(shown.body.request, { body, bodyBytes: body.length }, 'shown to the approver with its body')
  // What an approval replays (this fleet's control plane holds no billing credential, so the
  // replay itself is the approval tests'): the body captured, not an empty one.
  t.match(shown.body.params, { bodyCaptured: true, body: Buffer.from(body).toString('base64') })
})
