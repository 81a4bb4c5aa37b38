import t from 'tap'
import { startFleet } from '../helpers/fleet.js'
import { agentRequest } from '../helpers/proxy.js'

/**
 * Guarantee 1 (contract §1.2): once POST /v1/revoke or a policy PUT has returned, no
 * proxy decides under the old state, even with pub/sub invalidation lost on both proxies.
 * Real Redis (and a real Redis Cluster), real Postgres, two proxies, a real upstream.
 */
// The same guarantee on a Redis Cluster of three masters: the hash-tagged keys keep each
// tenant's commit one script in one slot (fewer rounds there: the guarantee, not the count).
for (const [backend, rounds] of [
  ['Redis', 100],
  ['Redis Cluster', 30],
] as const) {
  t.test(
    `kill switch and policy flips are linearizable across two proxies with invalidation suppressed (${backend})`,
    async (t) => {
      const fleet = await startFleet(t, { proxies: 2, deaf: true, cluster: backend === 'Redis Cluster' })
      const [a, b] = fleet.proxies.map((p) => p.port) as [number, number]
      const write = (port: number) =>
        agentRequest(port, { method: 'POST', path: '/sys_billing/v1/verify', body: '{}' })
      const sponsor = { bearer: fleet.tenant.sponsorToken }

      t.test(`revoke, ${rounds} times`, async (t) => {
        let stale = 0
        for (let i = 0; i < rounds; i++) {
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

      t.test(`policy PUT allow → deny, ${rounds} times`, async (t) => {
        let stale = 0
        for (let i = 0; i < rounds; i++) {
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
}

/**
 * Issue 14: the kill switch stops reads too, where they would carry the injected credential:
 * a revoked agent must not keep reading the upstream as the enrolled identity. Pub/sub is
 * suppressed, so only the commit-time version check can tell the proxies.
 */
t.test('a revoked agent reads nothing through the proxy with the injected credential', async (t) => {
  const fleet = await startFleet(t, { proxies: 2, deaf: true })
  const [a, b] = fleet.proxies.map((p) => p.port) as [number, number]
  const sponsor = { bearer: fleet.tenant.sponsorToken }
  // A second system that injects nothing: its reads are the agent's own, and still pass.
  const open = await fleet.api.post(
    '/v1/systems',
    { systemId: 'sys_open', upstream: fleet.upstream.origin, routes: [] },
    { bearer: fleet.tenant.apiKey },
  )
  t.equal(open.status, 201)
  const read = (port: number, system = 'sys_billing') =>
    agentRequest(port, { method: 'GET', path: `/${system}/v1/report` })
  for (let i = 0; i < 20; i++) {
    const [okA, okB] = await Promise.all([read(a), read(b)])
    if (okA.status !== 200 || okB.status !== 200)
      t.fail(`round ${i}: before revoke ${okA.status}/${okB.status}`)
    const before = fleet.upstream.received.length
    const target = i % 2 === 0 ? { all: true } : { keyId: fleet.agent.keyId }
    t.equal((await fleet.api.post('/v1/revoke', target, sponsor)).status, 200)
    for (const r of await Promise.all([read(a), read(b)])) {
      if (r.status !== 403 || r.json().code !== 'revoked')
        t.fail(`round ${i}: after revoke ${r.status} ${r.body}`)
      t.equal(r.json().barred, i % 2 === 0 ? 'sponsor_revoked_tenant' : 'sponsor_revoked_key')
    }
    t.equal(
      fleet.upstream.received.length,
      before,
      `round ${i}: no read reached the upstream with the credential`,
    )
    const plain = await read(a, 'sys_open')
    t.equal(plain.status, 200, 'a read that carries no injected credential is the agent’s own')
    t.equal(fleet.upstream.received.at(-1)?.headers.authorization, undefined)
    t.equal((await fleet.api.post('/v1/reinstate', target, sponsor)).status, 200)
  }
})
