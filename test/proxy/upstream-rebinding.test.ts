import type { LookupFunction } from 'node:net'
import t from 'tap'
import { startFleet } from '../helpers/fleet.js'
import { agentRequest } from '../helpers/proxy.js'
import { billingSystems } from '../helpers/proxy-fixtures.js'

/**
 * DNS rebinding: an admin enrols a name that resolves to a public address, then points its
 * record at the cloud metadata service or a cluster Service. With private upstreams not allowed,
 * the system is held to public addresses at every connection, by gate-proxy and by the control
 * plane's execute alike: the write is refused before it connects, and the injected credential
 * goes nowhere. Where private upstreams are allowed, the same name and the same resolver connect
 * (so the refusal is the rule's, not a name that does not resolve).
 */
const NAME = 'billing.rebind.test'

for (const allowPrivateUpstreams of [false, true])
  t.test(
    `a name that resolved public at enrolment and private now (private upstreams ${allowPrivateUpstreams ? 'allowed' : 'not allowed'})`,
    async (t) => {
      process.env.BILLING_TOKEN = 'up-secret'
      const asked: string[] = []
      // Public when enrolled; loopback (where the recording upstream listens) when connecting.
      const lookup: LookupFunction = (hostname, options, callback) => {
        asked.push(hostname)
        if (hostname !== NAME)
          return callback(Object.assign(new Error('ENOTFOUND'), { code: 'ENOTFOUND' }), '')
        if (options.all) callback(null, [{ address: '127.0.0.1', family: 4 }])
        else callback(null, '127.0.0.1', 4)
      }
      const fleet = await startFleet(t, {
        proxies: 1,
        names: {
          addressesOf: async (host) => (host === NAME ? ['93.184.216.34'] : []),
          lookup,
          allowPrivateUpstreams,
        },
        systems: (origin) => billingSystems(origin.replace('127.0.0.1', NAME)),
      })
      const proxy = fleet.proxies[0]!
      // The flag is the control plane's, shown read-only, and on record in the enrolment's receipt.
      const enrolled = (await fleet.api.get('/v1/systems/sys_billing', { bearer: fleet.tenant.apiKey })).body
      t.equal(enrolled.publicOnly, allowPrivateUpstreams ? undefined : true, 'publicOnly as shown')
      const [created] = (
        await fleet.cp.database!.sql<{ body: string }[]>`select body from receipts
          where tenant_id = ${fleet.tenant.tenantId} and kind = 'SYSTEM_CREATE'`
      ).map((r) => JSON.parse(r.body))
      t.equal(created.detail.publicOnly, !allowPrivateUpstreams, 'publicOnly on record')

      const viaProxy = await agentRequest(proxy.port, {
        method: 'POST',
        path: '/sys_billing/v1/verify',
        body: '{}',
      })
      const checked = await fleet.api.post(
        '/v1/check',
        {
          verb: 'verify',
          request: { systemId: 'sys_billing', method: 'POST', path: '/v1/verify', body: {} },
        },
        { bearer: fleet.agent.apiKey },
      )
      const executed = await fleet.api.post(
        '/v1/execute',
        {
          systemId: 'sys_billing',
          method: 'POST',
          path: '/v1/verify',
          body: {},
          leaseId: checked.body.leaseId,
        },
        { bearer: fleet.agent.apiKey },
      )
      t.ok(
        asked.filter((h) => h === NAME).length >= 2,
        'both the proxy and execute resolved the name through the resolver given',
      )

      if (allowPrivateUpstreams) {
        t.equal(viaProxy.status, 200, 'the proxy connected')
        t.equal(executed.status, 200, 'execute connected')
        t.same(
          fleet.upstream.received.map((r) => [r.url, r.headers.authorization]),
          [
            ['/v1/verify', 'Bearer up-secret'],
            ['/v1/verify', 'Bearer up-secret'],
          ],
        )
        return
      }
      t.equal(viaProxy.status, 502)
      const answer = viaProxy.json()
      t.match(answer, { code: 'upstream_address_refused', receiptId: /^rcp_/ })
      t.notMatch(JSON.stringify(answer), /127\.0\.0\.1/, 'the address is not told to the agent')
      t.equal(executed.status, 502, JSON.stringify(executed.body).slice(0, 300))
      t.match(executed.body, {
        code: 'upstream_error',
        upstreamCalled: false,
        failure: 'private_address',
      })
      t.equal(fleet.upstream.arrivals, 0, 'nothing reached the upstream, credential included')
    },
  )
