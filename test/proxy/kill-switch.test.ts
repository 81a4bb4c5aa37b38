import t from 'tap'
import { startFleet } from '../helpers/fleet.js'
import { agentRequest } from '../helpers/proxy.js'

/**
 * Guarantee 1 (contract §1.2): once POST /v1/revoke or a policy PUT has returned, no
 * proxy decides under the old state, even with pub/sub invalidation lost on both proxies.
 * Real Redis, real Postgres, two proxies, a real upstream.
 */
t.test(
  'kill switch and policy flips are linearizable across two proxies with invalidation suppressed',
  async (t) => {
    const fleet = await startFleet(t, { proxies: 2, deaf: true })
    const [a, b] = fleet.proxies.map((p) => p.port) as [number, number]
    const write = (port: number) =>
      agentRequest(port, { method: 'POST', path: '/sys_billing/v1/verify', body: '{}' })
    const sponsor = { bearer: fleet.tenant.sponsorToken }

    t.test('revoke, 100 times', async (t) => {
      let stale = 0
      for (let i = 0; i < 100; i++) {
        const before = fleet.upstream.received.length
        const [okA, okB] = await Promise.all([write(a), write(b)])
        if (okA.status !== 200 || okB.status !== 200)
          t.fail(`round ${i}: before revoke ${okA.status}/${okB.status}`)
        t.equal((await fleet.api.post('/v1/revoke', { all: true }, sponsor)).status, 200)
        const [deniedA, deniedB] = await Promise.all([write(a), write(b)])
        for (const d of [deniedA, deniedB]) {
          if (d.status !== 403 || d.json().reason !== 'sponsor_revoked_tenant') {
            stale++
            t.fail(`round ${i}: after revoke ${d.status} ${d.body}`)
          }
        }
        t.equal(
          fleet.upstream.received.length,
          before + 2,
          `round ${i}: only the two pre-revoke writes reached the upstream`,
        )
        t.equal((await fleet.api.post('/v1/reinstate', { all: true }, sponsor)).status, 200)
      }
      t.equal(stale, 0, 'no write was decided under the old state')
    })

    t.test('policy PUT allow → deny, 100 times', async (t) => {
      let stale = 0
      for (let i = 0; i < 100; i++) {
        await fleet.api.put('/v1/policy', { verify: 'allow' }, { bearer: fleet.tenant.apiKey })
        const [okA, okB] = await Promise.all([write(a), write(b)])
        if (okA.status !== 200 || okB.status !== 200)
          t.fail(`round ${i}: allow gave ${okA.status}/${okB.status}`)
        await fleet.api.put('/v1/policy', { verify: 'deny' }, { bearer: fleet.tenant.apiKey })
        const [dA, dB] = await Promise.all([write(a), write(b)])
        for (const d of [dA, dB]) {
          if (d.status !== 403 || d.json().reason !== 'policy_deny') {
            stale++
            t.fail(`round ${i}: after deny ${d.status} ${d.body}`)
          }
        }
      }
      t.equal(stale, 0, 'no write was decided under the old policy')
    })
  },
)
