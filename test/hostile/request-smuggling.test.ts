import { request } from 'node:http'
import t from 'tap'
import { startFleet } from '../helpers/fleet.js'

/**
 * A body must reach the upstream framed as one body, whatever the agent's framing says: the
 * proxy shares kept-alive upstream connections between requests, and a body that went out
 * unframed would be read there as a request of its own, past the gate, with the injected
 * credential and no receipt. Each agent request below carries, as its body, a refund the policy
 * denies: the upstream must see the agent's request once, with that body, and no refund.
 */
const SMUGGLED =
  'POST /v1/refunds HTTP/1.1\r\nHost: up\r\nContent-Type: application/json\r\nContent-Length: 13\r\n\r\n{"amount":99}'

function send(port: number, method: string, headers: Record<string, string>): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: '127.0.0.1', port, method, path: '/sys_billing/v1/anything', headers, agent: false },
      (res) => {
        res.resume()
        res.on('end', () => resolve(res.statusCode ?? 0))
      },
    )
    req.on('error', reject)
    req.setTimeout(15_000, () => req.destroy(new Error(`${method}: no answer`)))
    if (headers['transfer-encoding']) {
      // Two chunks: the framing the upstream must get back is Node's, not the agent's.
      req.write(SMUGGLED.slice(0, 40))
      req.end(SMUGGLED.slice(40))
    } else req.end(SMUGGLED)
  })
}

t.test('no framing an agent sends gets a body past the gate as a request of its own', async (t) => {
  const fleet = await startFleet(t, {
    proxies: 1,
    systems: (upstream) => ({
      passthrough: [],
      systems: [
        {
          systemId: 'sys_billing',
          kind: 'http',
          upstream,
          credential: { header: 'authorization', prefix: 'Bearer ', fromEnv: 'BILLING_TOKEN' },
          reads: 'pass',
          routes: [
            { method: 'POST', path: '/v1/refunds', verb: 'refund' },
            ...(['DELETE', 'POST', 'PUT', 'PATCH'] as const).map((method) => ({
              method,
              path: '/v1/anything',
              verb: 'verify',
            })),
          ],
          tools: [],
        },
      ],
    }),
  })
  const port = fleet.proxies[0]?.port as number
  t.equal(
    (await fleet.api.put('/v1/policy', { refund: 'deny', verify: 'allow' }, { bearer: fleet.tenant.apiKey }))
      .status,
    200,
  )

  const shapes: Record<string, Record<string, string>> = {
    chunked: { 'transfer-encoding': 'chunked' },
    'Connection: content-length': { connection: 'content-length', 'content-length': String(SMUGGLED.length) },
    'Connection: transfer-encoding': { connection: 'transfer-encoding', 'transfer-encoding': 'chunked' },
  }
  for (const method of ['GET', 'HEAD', 'OPTIONS', 'DELETE', 'POST', 'PUT', 'PATCH']) {
    for (const [shape, headers] of Object.entries(shapes)) {
      const before = fleet.upstream.received.length
      const status = await send(port, method, headers)
      t.equal(
        status,
        200,
        `${method}, ${shape}: answered (reads pass, other methods are ALLOWed verify writes)`,
      )
      // Let a smuggled request, if any, land at the upstream before counting.
      await new Promise((r) => setTimeout(r, 50))
      const got = fleet.upstream.received.slice(before)
      t.same(
        got.map((g) => `${g.method} ${g.url}`),
        [`${method} /v1/anything`],
        `${method}, ${shape}: the upstream saw the agent's request once, and nothing else`,
      )
      t.equal(got[0]?.body.toString('utf8'), SMUGGLED, `${method}, ${shape}: with its body whole, as a body`)
    }
  }
  t.notOk(
    fleet.upstream.received.some((g) => g.url === '/v1/refunds'),
    'the denied refund never reached the upstream',
  )
})
