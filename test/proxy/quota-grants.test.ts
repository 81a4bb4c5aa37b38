import t from 'tap'
import { startFleet, waitForCount } from '../helpers/fleet.js'
import { agentRequest } from '../helpers/proxy.js'

/**
 * Guarantees 2 and 3 (contract §1.3), across two proxies and the API, on real Postgres and
 * real Redis, standalone and as a cluster of three masters.
 */
for (const backend of ['Redis', 'Redis Cluster'] as const) {
  t.test(`exact quota and single-use grants across two proxies and the API (${backend})`, async (t) => {
    const cluster = backend === 'Redis Cluster'
    const fleet = await startFleet(t, { proxies: 2, quota: 100, cluster })
    const [a, b] = fleet.proxies.map((p) => p.port) as [number, number]

    t.test('a key with 100 checks left gets exactly 100 decisions; the rest are refused', async (t) => {
      const calls = Array.from({ length: 150 }, (_, i) => {
        if (i % 3 === 2)
          return fleet.api
            .post('/v1/check', { verb: 'verify' }, { bearer: fleet.agent.apiKey })
            .then((r) => ({ via: 'api', status: r.status, code: r.body.code }))
        return agentRequest(i % 3 === 0 ? a : b, {
          method: 'POST',
          path: '/sys_billing/v1/verify',
          body: '{}',
        }).then((r) => ({
          via: 'proxy',
          status: r.status,
          code: r.status === 200 ? undefined : r.json().code,
        }))
      })
      const results = await Promise.all(calls)
      const decided = results.filter((r) => r.status === 200)
      const refused = results.filter((r) => r.status !== 200)
      t.equal(decided.length, 100, 'exactly 100 decisions')
      t.equal(refused.length, 50)
      t.ok(
        refused.every((r) => r.code === 'quota_exhausted' && r.status === 402),
        'the API and the proxies answer alike: 402 quota_exhausted (one registry entry)',
      )
      t.equal(
        fleet.upstream.received.length,
        decided.filter((r) => r.via === 'proxy').length,
        'every proxy decision (ALLOW) reached the upstream, no refusal did',
      )
      const checks = async () =>
        (
          await fleet.cp.database!.sql<
            { n: number }[]
          >`select count(*)::int as n from receipts where kind = 'CHECK' and key_id = ${fleet.agent.keyId}`
        )[0]?.n ?? 0
      t.equal(
        await waitForCount(checks, 100),
        100,
        'exactly 100 CHECK receipts, drained from the proxies or written by the API',
      )
      await new Promise((r) => setTimeout(r, 300))
      t.equal(await checks(), 100, 'and no more after the drain settles')
    })

    t.test(
      'one grant, 20 concurrent requests over two proxies: exactly one reaches the upstream',
      async (t) => {
        // A second fleet: the first one's key has used its quota.
        const fleet2 = await startFleet(t, { proxies: 2, cluster })
        const [c, d] = fleet2.proxies.map((p) => p.port) as [number, number]
        for (let round = 0; round < 3; round++) {
          const grant = await fleet2.api.post(
            '/v1/grants',
            { verb: 'provision', target: `vm-${round}` },
            { bearer: fleet2.tenant.sponsorToken },
          )
          t.equal(grant.status, 201)
          const before = fleet2.upstream.received.length
          const results = await Promise.all(
            Array.from({ length: 20 }, (_, i) =>
              agentRequest(i % 2 ? c : d, {
                method: 'POST',
                path: `/sys_billing/v1/provision/vm-${round}`,
                body: '{}',
              }),
            ),
          )
          t.equal(results.filter((r) => r.status === 200).length, 1, `round ${round}: one ALLOW`)
          t.equal(results.filter((r) => r.status === 403 && r.json().reason === 'grant_required').length, 19)
          t.equal(fleet2.upstream.received.length, before + 1, 'exactly one request reached the upstream')
        }
        const consumed = async () =>
          (
            await fleet2.cp.database!.sql<
              { n: number }[]
            >`select count(*)::int as n from grants where tenant_id = ${fleet2.tenant.tenantId} and consumed_at is not null`
          )[0]?.n ?? 0
        t.equal(await waitForCount(consumed, 3), 3, 'the drain recorded each consumption in Postgres')
      },
    )
  })
}
