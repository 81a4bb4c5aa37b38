import { request } from 'node:http'
import { type AddressInfo, connect, createServer } from 'node:net'
import t from 'tap'
import { startBillingProxy } from '../helpers/billing-proxy.js'
import { startFleet } from '../helpers/fleet.js'
import { billingSystems } from '../helpers/proxy-fixtures.js'

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

  // A Transfer-Encoding Node's parser ignores (empty, blank) or reads as chunked while an
  // upstream may not (another spelling, other codings): refused before anything is decided. An
  // empty one beside a Content-Length once went upstream with neither, the body unframed: the
  // next agent's allowed write carried a denied one, credential and all (found in review).
  const raw = (te: string, rest: string) =>
    new Promise<string>((resolve, reject) => {
      const s = connect(port, '127.0.0.1', () =>
        s.write(`POST /sys_billing/v1/anything HTTP/1.1\r\nHost: up\r\nTransfer-Encoding:${te}\r\n${rest}`),
      )
      let text = ''
      s.on('data', (d) => {
        text += d
      })
      s.on('error', reject)
      s.on('close', () => resolve(text))
      s.setTimeout(15_000, () => s.destroy(new Error(`TE ${JSON.stringify(te)}: no answer`)))
    })
  const start = SMUGGLED.slice(0, 60)
  for (const te of [
    ' ',
    '\t',
    '',
    ' gzip, chunked',
    ' identity, chunked',
    ' ,chunked',
    ' chunked, identity',
  ]) {
    const before = fleet.upstream.received.length
    const answer = await raw(te, `Content-Length: ${start.length}\r\n\r\n${start}`)
    t.match(answer, /^HTTP\/1\.1 400 /, `TE ${JSON.stringify(te)} with a Content-Length: 400`)
    t.match(answer, /"code":"invalid_request"/, `TE ${JSON.stringify(te)}: invalid_request`)
    // A write after it, as another agent of the proxy would send.
    t.equal(await send(port, 'POST', { 'content-length': String(SMUGGLED.length) }), 200)
    await new Promise((r) => setTimeout(r, 50))
    t.same(
      fleet.upstream.received.slice(before).map((g) => `${g.method} ${g.url}`),
      ['POST /v1/anything'],
      `TE ${JSON.stringify(te)}: only the next write reached the upstream`,
    )
  }
  // `chunked` in another case is chunked to every parser: forwarded, as `chunked`.
  const before = fleet.upstream.received.length
  const chunked = `${SMUGGLED.length.toString(16)}\r\n${SMUGGLED}\r\n0\r\n\r\n`
  const upper = await raw(' CHUNKED', `Connection: close\r\n\r\n${chunked}`)
  t.match(upper, /^HTTP\/1\.1 200 /, 'TE CHUNKED: forwarded')
  const got = fleet.upstream.received.slice(before)
  t.same(
    got.map((g) => `${g.method} ${g.url}`),
    ['POST /v1/anything'],
  )
  t.equal(got[0]?.body.toString('utf8'), SMUGGLED, 'with its body whole')
  t.equal(got[0]?.headers['transfer-encoding'], 'chunked', "framed as chunked, not in the agent's spelling")

  t.notOk(
    fleet.upstream.received.some((g) => g.url === '/v1/refunds'),
    'the denied refund never reached the upstream',
  )
})

/**
 * An upstream with a CL.0 flaw (it never reads a GET's body, so those bytes start its next
 * request) must not let a read's body splice the proxy's next request, injected credential and
 * all, into a request of the agent's writing that stores it where the agent can read it back
 * (found in review). A read with a body goes out on a connection of its own.
 */
t.test("a read's body cannot capture the next request on a pooled upstream connection", async (t) => {
  const stored: string[] = []
  const seen: string[] = []
  const upstream = createServer((socket) => {
    let buf = ''
    socket.on('data', (d) => {
      buf += d.toString('latin1')
      for (;;) {
        const end = buf.indexOf('\r\n\r\n')
        if (end === -1) return
        const head = buf.slice(0, end)
        const method = head.split(' ')[0]
        const length = Number(/content-length:\s*(\d+)/i.exec(head)?.[1] ?? 0)
        let used = end + 4
        // The flaw: a GET's or a DELETE's body is left on the connection, to be read as the
        // next request.
        if (method !== 'GET' && method !== 'DELETE') {
          if (buf.length < used + length) return
          stored.push(buf.slice(used, used + length))
          used += length
        }
        seen.push(head)
        buf = buf.slice(used)
        const reply = method === 'GET' || method === 'DELETE' ? 'ok' : 'stored'
        socket.write(`HTTP/1.1 200 OK\r\ncontent-length: ${reply.length}\r\n\r\n${reply}`)
      }
    })
    socket.on('error', () => {})
  })
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r))
  t.teardown(() => upstream.close())
  const origin = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`
  const bench = await startBillingProxy(t, {
    systems: () => {
      const file = billingSystems(origin)
      file.systems.push({
        systemId: 'sys_gql',
        kind: 'graphql',
        upstream: origin,
        credential: { header: 'authorization', prefix: 'Bearer ', fromEnv: 'BILLING_TOKEN' },
        reads: 'pass',
        routes: [],
        tools: [],
        graphql: { endpoint: '/graphql', mutations: [{ field: 'closeIssue', verb: 'refund' }] },
      } as (typeof file.systems)[number])
      file.systems.push({
        systemId: 'sys_mcp',
        kind: 'mcp',
        upstream: origin,
        credential: { header: 'authorization', prefix: 'Bearer ', fromEnv: 'BILLING_TOKEN' },
        reads: 'pass',
        routes: [],
        tools: [],
        mcp: { endpoint: '/mcp', tools: [{ name: 'delete_*', verb: 'refund' }], filterToolsList: false },
      } as (typeof file.systems)[number])
      return file
    },
  })
  await bench.api.put('/v1/policy', { verify: 'allow', admit: 'allow' }, { bearer: bench.tenant.apiKey })
  const smuggled = 'POST /v1/comments HTTP/1.1\r\nHost: x\r\nContent-Length: 120\r\n\r\nc='
  for (const [name, method, path] of [
    ['a read that passes ungated', 'GET', '/sys_billing/v1/static'],
    ['a read a route decides (a receipt)', 'GET', '/sys_billing/v1/secret-report'],
    ['a DELETE a route decides (a receipt)', 'DELETE', '/sys_billing/v1/customers/cus_1'],
  ]) {
    seen.length = 0
    const first = await rawExchange(
      bench.port,
      `${method} ${path} HTTP/1.1\r\nHost: x\r\nContent-Length: ${smuggled.length}\r\n\r\n${smuggled}`,
    )
    t.match(first, /^HTTP\/1\.1 200/, `${name}: answered`)
    const second = await rawExchange(bench.port, 'GET /sys_billing/v1/next HTTP/1.1\r\nHost: x\r\n\r\n')
    t.match(second, /^HTTP\/1\.1 200[\s\S]*\r\n\r\nok$/, `${name}: the next read is answered as itself`)
    t.match(seen[0], /\r\nconnection: close/i, `${name}: went out asking to close`)
    t.notMatch(
      seen.find((h) => h.startsWith('GET /v1/next')) ?? '',
      /\r\nconnection: close/i,
      'a read without a body keeps its connection',
    )
  }

  // A GraphQL query by GET carrying a body: the gate reads the URL's calls, not the body, so the
  // body is refused, never sent (found in review; it went out with the credential before).
  seen.length = 0
  const gqlGet = await rawExchange(
    bench.port,
    `GET /sys_gql/graphql?query=${encodeURIComponent('{ viewer }')} HTTP/1.1\r\nHost: x\r\nContent-Length: ${smuggled.length}\r\n\r\n${smuggled}`,
  )
  t.match(gqlGet, /^HTTP\/1\.1 403 [\s\S]*"code":"unmapped_route"/, 'a GraphQL GET with a body: refused')
  t.same(seen, [], 'and nothing of it reached the upstream')

  // DELETE on an MCP endpoint ends a session and passes ungated: only at the endpoint as
  // enrolled, and only without a body (found in review: a body there carried a denied
  // tools/call past the gate, and the lenient match let `/MCP/` and `/mcp.json` pass too).
  seen.length = 0
  const call =
    '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"delete_repository","arguments":{}}}'
  const carried = `POST /mcp HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\ncontent-length: ${call.length}\r\n\r\n${call}`
  for (const [name, text] of [
    [
      'a DELETE at the MCP endpoint with a body',
      `DELETE /sys_mcp/mcp HTTP/1.1\r\nHost: x\r\nContent-Length: ${carried.length}\r\n\r\n${carried}`,
    ],
    ['a DELETE at the endpoint in another case', 'DELETE /sys_mcp/MCP/ HTTP/1.1\r\nHost: x\r\n\r\n'],
    ['a DELETE at the endpoint with a format suffix', 'DELETE /sys_mcp/mcp.json HTTP/1.1\r\nHost: x\r\n\r\n'],
  ] as const) {
    const answer = await rawExchange(bench.port, text)
    t.match(answer, /^HTTP\/1\.1 403[\s\S]*"code":"unmapped_route"/, `${name}: refused as an unmapped write`)
  }
  await new Promise((r) => setTimeout(r, 50))
  t.same(seen, [], 'none of them reached the upstream')
  const ended = await rawExchange(bench.port, 'DELETE /sys_mcp/mcp HTTP/1.1\r\nHost: x\r\n\r\n')
  t.match(
    ended,
    /^HTTP\/1\.1 200[\s\S]*\r\n\r\nok$/,
    "the session's end, at the endpoint with no body, passes",
  )
  t.match(seen[0], /^DELETE \/mcp HTTP\/1\.1[\s\S]*\r\nauthorization: Bearer up-secret/i)

  t.notOk(
    stored.some((s) => s.includes('up-secret')),
    `no request of the proxy's, credential and all, was captured: ${JSON.stringify(stored)}`,
  )
  t.notOk(
    seen.some((h) => h.startsWith('POST /mcp')),
    'the tools/call carried in a body never reached the upstream',
  )
})

/** Sends raw bytes, and reads what comes back until the answer's body is complete or the socket ends. */
function rawExchange(port: number, text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(text))
    let out = ''
    const done = () => {
      socket.destroy()
      resolve(out)
    }
    socket.on('data', (d) => {
      out += d.toString('latin1')
      const end = out.indexOf('\r\n\r\n')
      const length = Number(/content-length:\s*(\d+)/i.exec(out)?.[1] ?? Number.NaN)
      if (end !== -1 && out.length >= end + 4 + length) done()
    })
    socket.on('end', done)
    socket.on('error', reject)
    socket.setTimeout(10_000, () => reject(new Error('no answer')))
  })
}
