import { generate } from 'otplib'
import t from 'tap'
import type { ManualClock } from '../../src/core/clock.js'
import { startFleet, waitForCount } from '../helpers/fleet.js'
import { agentRequest } from '../helpers/proxy.js'
import { billingSystems } from '../helpers/proxy-fixtures.js'
import { RecordingUpstream } from '../helpers/upstream.js'

/**
 * An action remembers the version of its system it was staged under, so a change to the system
 * after staging is caught even within the same second (timestamps alone could not tell): the
 * approver would otherwise authorise a write to where the system points now, with its credential.
 * Staged by a proxy, carried through the receipt stream and the drain into Postgres.
 */
t.test('a proxy-staged write whose system changed within the same second is not approved', async (t) => {
  // The control plane's approvals inject the credential from its own environment.
  process.env.BILLING_TOKEN = 'up-secret'
  const fleet = await startFleet(t, { proxies: 1 })
  const proxy = fleet.proxies[0]!
  const other = await new RecordingUpstream().start()
  t.teardown(() => other.close())
  const admin = { bearer: fleet.tenant.apiKey }
  const code = async () =>
    await generate({ secret: fleet.tenant.totp.secret, epoch: Math.floor(fleet.clock.nowMs() / 1000) })
  const stage = async () => {
    const staged = await agentRequest(proxy.port, {
      method: 'POST',
      path: '/sys_billing/v1/refunds',
      body: '{"charge":"ch_1"}',
    })
    t.equal(staged.status, 428, 'staged for approval')
    const actionId = staged.json().actionId as string
    const stored = async () =>
      (
        await fleet.cp.database!.sql<
          { n: number }[]
        >`select count(*)::int as n from pending_actions where id = ${actionId}`
      )[0]?.n ?? 0
    await waitForCount(stored, 1)
    const [row] = await fleet.cp.database!.sql<
      { system_version: number | null }[]
    >`select system_version from pending_actions where id = ${actionId}`
    return { actionId, systemVersion: row?.system_version ?? null }
  }
  const before = (await fleet.api.get('/v1/systems/sys_billing', admin)).body.version as number
  const first = await stage()
  t.equal(first.systemVersion, before, 'the action holds the version it was staged under')

  // Re-pointed in the same second as the staging (the clock does not move).
  const { tenantId: _, ...definition } = billingSystems(other.origin).systems[0]!
  const put = await fleet.api.put('/v1/systems/sys_billing', definition, admin)
  t.equal(put.status, 200, 're-pointed')
  t.equal(put.body.updatedAt, Math.floor(fleet.clock.nowMs() / 1000), 'within the second of the staging')
  const refused = await fleet.api.post(
    `/v1/agent/actions/${first.actionId}/approve`,
    { totpCode: await code() },
    admin,
  )
  t.same([refused.status, refused.body.code], [409, 'action_system_changed'])
  t.same(
    [fleet.upstream.received.length, other.received.length],
    [0, 0],
    'nothing was sent to either upstream',
  )

  // Staged again once the proxy has the new version, it is approved and goes where it now points.
  let again = await stage()
  for (let i = 0; i < 100 && again.systemVersion !== before + 1; i++) {
    await new Promise((r) => setTimeout(r, 50))
    again = await stage()
  }
  t.equal(again.systemVersion, before + 1, 'staged under the new version')
  ;(fleet.clock as ManualClock).advance(31_000)
  const approved = await fleet.api.post(
    `/v1/agent/actions/${again.actionId}/approve`,
    { totpCode: await code() },
    admin,
  )
  t.equal(approved.status, 200, JSON.stringify(approved.body).slice(0, 200))
  t.same(
    other.received.map((r) => [r.method, r.url, r.headers.authorization]),
    [['POST', '/v1/refunds', 'Bearer up-secret']],
  )
  t.equal(fleet.upstream.received.length, 0)
})
