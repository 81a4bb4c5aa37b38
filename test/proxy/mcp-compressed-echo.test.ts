import { createServer } from 'node:http'
import { gzipSync } from 'node:zlib'
import t from 'tap'
import type { SystemsFile } from '../../src/config/systems.js'
import { startBillingProxy } from '../helpers/billing-proxy.js'
import { agentRequest } from '../helpers/proxy.js'

/**
 * Found in review: on an MCP system whose tools/list answers are filtered, an error answer
 * (no JSON to filter) was relayed as it came, compressed, while the credential check left
 * compressed answers to the filter: a gzipped echo of the injected credential reached the agent.
 */
t.test('a compressed answer the tools/list filter passes unread is withheld, not relayed', async (t) => {
  let status = 401
  const upstream = createServer((req, res) => {
    req.resume()
    req.on('end', () => {
      res.writeHead(status, { 'content-type': 'text/plain', 'content-encoding': 'gzip' })
      res.end(gzipSync(`invalid token: ${req.headers.authorization}`))
    })
  })
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve))
  t.teardown(() => upstream.close())
  const origin = `http://127.0.0.1:${(upstream.address() as { port: number }).port}`
  const bench = await startBillingProxy(t, {
    systems: () =>
      ({
        passthrough: [],
        systems: [
          {
            systemId: 'sys_mcp',
            kind: 'mcp',
            upstream: origin,
            reads: 'pass',
            routes: [],
            tools: [],
            credential: { header: 'authorization', prefix: 'Bearer ', fromEnv: 'BILLING_TOKEN' },
            mcp: {
              endpoint: '/mcp',
              filterToolsList: true,
              tools: [{ name: 'create_issue', verb: 'verify' }],
            },
          },
        ],
      }) as unknown as SystemsFile,
  })
  const list = JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/list' })
  for (const [method, headers, body] of [
    ['POST', { 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, list],
    ['GET', { accept: 'text/event-stream' }, undefined],
  ] as const) {
    for (const s of [401, 500]) {
      status = s
      const r = await agentRequest(bench.port, {
        method,
        path: '/sys_mcp/mcp',
        headers,
        ...(body ? { body } : {}),
      })
      t.same(
        [r.status, r.json().code, r.json().reason],
        [502, 'answer_withheld', 'answer_compressed'],
        `${method} answered ${s}`,
      )
      t.notOk(r.body.includes(gzipSync('up-secret')), 'nothing of it relayed')
    }
  }
})
