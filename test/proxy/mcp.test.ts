import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { McpError } from '@modelcontextprotocol/sdk/types.js'
import t from 'tap'
import { startBillingProxy } from '../helpers/billing-proxy.js'
import { startMcpUpstream } from '../helpers/mcp-server.js'
import { agentRequest, agentRequestExpectingContinue } from '../helpers/proxy.js'

/**
 * Issue 16: MCP tool calls through gate-proxy, with the real SDK on both sides (Client over
 * StreamableHTTPClientTransport, McpServer over StreamableHTTPServerTransport). Every
 * tools/call is decided; one that is not ALLOW is answered as a JSON-RPC error the SDK
 * raises as McpError, and never reaches the server.
 */

t.test('MCP tool calls through gate-proxy', async (t) => {
  const mcp = await startMcpUpstream(t)
  const bench = await startBillingProxy(t, {
    systems: () => ({
      passthrough: [],
      systems: [
        {
          systemId: 'sys_github',
          kind: 'mcp',
          upstream: mcp.origin,
          credential: { header: 'authorization', prefix: 'Bearer ', fromEnv: 'BILLING_TOKEN' },
          reads: 'pass',
          routes: [],
          tools: [],
          mcp: {
            endpoint: '/mcp',
            filterToolsList: false,
            tools: [
              { name: 'create_issue', verb: 'verify', target: '{arguments.repo}' },
              { name: 'merge_*', verb: 'refund', target: '{arguments.repo}' },
              { name: 'delete_*', verb: 'repo.delete', target: '{arguments.repo}' },
            ],
          },
        },
      ],
    }),
    verbs: ['repo.delete'],
  })
  const client = new Client({ name: 'agent', version: '1.0.0' })
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${bench.port}/sys_github/mcp`)),
  )
  t.teardown(() => client.close())
  const receipts = async (kind = 'CHECK') =>
    (
      await bench.cp.database!.sql<{ body: string }[]>`select body from receipts
        where tenant_id = ${bench.tenant.tenantId} and kind = ${kind} order by seq`
    ).map((r) => JSON.parse(r.body))
  const refusalOf = async (p: Promise<unknown>) => {
    try {
      await p
    } catch (err) {
      if (err instanceof McpError) return err
      throw err
    }
    throw new Error('the call was not refused')
  }
  const toolCalls = () => mcp.seen.filter((s) => s.method === 'POST').length

  t.test('initialize and tools/list are reads: they pass, with the injected credential', async (t) => {
    const { tools } = await client.listTools()
    t.same(tools.map((x) => x.name).sort(), [
      'create_issue',
      'delete_repository',
      'merge_pull_request',
      'transfer_repository',
    ])
    t.equal(mcp.seen[0]?.headers.authorization, 'Bearer up-secret', 'the agent never held it')
    t.ok(mcp.seen.every((s) => s.url === '/mcp'))
  })

  t.test('ALLOW: the call reaches the server and the answer streams back; a receipt says so', async (t) => {
    const r = await client.callTool({ name: 'create_issue', arguments: { repo: 'acme/api', title: 'bug' } })
    t.same(r.content, [{ type: 'text', text: 'created "bug" in acme/api' }])
    t.same(mcp.executed, ['create_issue:acme/api'])
    t.match((await receipts()).at(-1), {
      decision: 'ALLOW',
      verb: 'verify',
      target: 'acme/api',
      detail: { via: 'mcp', systemId: 'sys_github', mcp: { tool: 'create_issue' } },
    })
    t.equal(mcp.seen.at(-1)?.headers.authorization, 'Bearer up-secret')
    t.ok(mcp.seen.at(-1)?.headers['mcp-session-id'], 'the session id is kept')
  })

  t.test('DENY: a JSON-RPC error with the decision and receipt; the server never sees it', async (t) => {
    const before = toolCalls()
    const err = await refusalOf(
      client.callTool({ name: 'delete_repository', arguments: { repo: 'acme/api' } }),
    )
    t.equal(err.code, -32001)
    t.match(err.message, /delete_repository denied by policy/)
    t.match(err.data, {
      code: 'denied',
      decision: 'DENY',
      verb: 'repo.delete',
      reason: 'policy_deny',
      tool: 'delete_repository',
      receiptId: /^rcp_/,
    })
    t.equal(toolCalls(), before)
    t.notOk(mcp.executed.includes('delete_repository:acme/api'))
  })

  t.test('an argument holding NUL is refused unread, and the log moves on (found in review)', async (t) => {
    // Its receipt (the target read off it) could not be stored in Postgres: decided and
    // forwarded, the write went out and its receipt stayed in the drain's stream for ever.
    const before = toolCalls()
    await t.rejects(
      client.callTool({ name: 'create_issue', arguments: { repo: 'acme\u0000api', title: 'x' } }),
      /unreadable_call|NUL/,
    )
    t.equal(toolCalls(), before, 'the server never sees it')
    const after = await client.callTool({
      name: 'create_issue',
      arguments: { repo: 'acme/after', title: 'y' },
    })
    t.same(after.content, [{ type: 'text', text: 'created "y" in acme/after' }])
    const [next] = (await receipts()).slice(-1)
    t.match(next, { decision: 'ALLOW', target: 'acme/after' }, 'the log moved on')
  })

  t.test('a tool no route maps is refused', async (t) => {
    const before = toolCalls()
    const err = await refusalOf(
      client.callTool({ name: 'transfer_repository', arguments: { repo: 'acme/api', to: 'evil' } }),
    )
    t.equal(err.code, -32005)
    t.match(err.data, { code: 'unmapped_call', tool: 'transfer_repository' })
    t.equal(toolCalls(), before)
  })

  t.test('STEP_UP: staged and refused with the action id; approval replays the exact call', async (t) => {
    const err = await refusalOf(
      client.callTool({ name: 'merge_pull_request', arguments: { repo: 'acme/api', number: 7 } }),
    )
    t.equal(err.code, -32002)
    const data = err.data as { actionId: string; receiptId: string }
    t.match(data, { code: 'step_up_required', decision: 'STEP_UP', actionId: /^act_/, receiptId: /^rcp_/ })
    t.notOk(mcp.executed.includes('merge_pull_request:acme/api#7'))
    const shown = await bench.api.get(`/v1/agent/actions/${data.actionId}`, { bearer: bench.tenant.apiKey })
    t.match(shown.body.request, {
      method: 'POST',
      path: '/mcp',
      bodyEncoding: 'json',
      body: { method: 'tools/call', params: { name: 'merge_pull_request', arguments: { number: 7 } } },
    })
    const approved = await bench.approve(data.actionId)
    t.same([approved.status, approved.body.type], [200, 'executed'], JSON.stringify(approved.body))
    t.same(mcp.executed.at(-1), 'merge_pull_request:acme/api#7', 'run once, on approval')
    t.match(approved.body.result.body, /merged acme\/api#7/, 'the server answered the replayed call')
    const replayed = mcp.seen.at(-1)
    t.equal(replayed?.headers.authorization, 'Bearer up-secret')
    t.ok(replayed?.headers['mcp-session-id'], "in the agent's session")
    t.match(replayed?.headers.accept, /text\/event-stream/)
  })

  t.test('a batch is decided call by call and refused whole: nothing of it is forwarded', async (t) => {
    const before = toolCalls()
    const r = await agentRequest(bench.port, {
      method: 'POST',
      path: '/sys_github/mcp',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify([
        {
          jsonrpc: '2.0',
          id: 1,
          method: 'tools/call',
          params: { name: 'create_issue', arguments: { repo: 'a/b', title: 't' } },
        },
        {
          jsonrpc: '2.0',
          id: 2,
          method: 'tools/call',
          params: { name: 'delete_repository', arguments: { repo: 'a/b' } },
        },
        { jsonrpc: '2.0', method: 'notifications/progress', params: {} },
      ]),
    })
    t.equal(r.status, 200)
    const answers = r.json() as { id: number; error: { code: number; data: Record<string, unknown> } }[]
    t.same(
      answers.map((a) => [a.id, a.error.code]),
      [
        [1, -32001],
        [2, -32001],
      ],
      'every request of the batch gets the refusal; the notification none',
    )
    t.match(answers[0]?.error.data, {
      tool: 'delete_repository',
      refusedTools: ['create_issue', 'delete_repository'],
    })
    t.equal(toolCalls(), before)
    t.notOk(mcp.executed.includes('create_issue:a/b'), 'the allowed call was not forwarded either')
  })

  t.test('what the gate cannot read is refused as JSON-RPC Invalid Request, never forwarded', async (t) => {
    const before = toolCalls()
    const bodies: [string, string][] = [
      ['not JSON', '{"jsonrpc":"2.0",'],
      ['not JSON-RPC 2.0', JSON.stringify({ id: 1, method: 'tools/call', params: { name: 'create_issue' } })],
      ['no tool name', JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: {} })],
      [
        'arguments not an object',
        JSON.stringify({
          jsonrpc: '2.0',
          id: 1,
          method: 'tools/call',
          params: { name: 'create_issue', arguments: [1] },
        }),
      ],
      [
        'a tool call as a notification',
        JSON.stringify({ jsonrpc: '2.0', method: 'tools/call', params: { name: 'delete_repository' } }),
      ],
      ['an empty batch', '[]'],
      [
        // A read to JSON.parse (the last member counts), a tool call to a server keeping the first.
        'method given twice',
        '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"delete_repository"},"method":"tools/list"}',
      ],
      [
        'an argument given twice',
        '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"create_issue","arguments":{"repo":"acme/web","repo":"acme/prod"}}}',
      ],
      [
        // Read whole, its arguments would exhaust the stack where the target is filled in.
        'arguments nested 10,000 deep',
        `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"create_issue","arguments":{"repo":${'['.repeat(10_000)}${']'.repeat(10_000)}}}}`,
      ],
    ]
    for (const [name, body] of bodies) {
      const r = await agentRequest(bench.port, {
        method: 'POST',
        path: '/sys_github/mcp',
        headers: { 'content-type': 'application/json' },
        body,
      })
      t.equal(r.status, 400, name)
      t.match(
        r.json(),
        { jsonrpc: '2.0', id: null, error: { code: -32600, data: { code: 'unreadable_call' } } },
        name,
      )
    }
    // body-parser inflates a body before it parses it; the gate reads the bytes as sent.
    const encoded = await agentRequest(bench.port, {
      method: 'POST',
      path: '/sys_github/mcp',
      headers: { 'content-type': 'application/json', 'content-encoding': 'br' },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/call',
        params: { name: 'create_issue', arguments: { repo: 'a/b', title: 't' } },
      }),
    })
    t.match(
      encoded.json(),
      { id: 1, error: { code: -32600, data: { code: 'unreadable_call' }, message: /br-encoded/ } },
      'a body with a Content-Encoding',
    )
    const text = await agentRequest(bench.port, {
      method: 'POST',
      path: '/sys_github/mcp',
      headers: { 'content-type': 'text/plain' },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/call',
        params: { name: 'delete_repository' },
      }),
    })
    t.equal(text.status, 400, 'a body not sent as JSON')
    const huge = await agentRequest(bench.port, {
      method: 'POST',
      path: '/sys_github/mcp',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/call',
        params: { name: 'create_issue', arguments: { repo: 'a/b', title: 'x'.repeat(2 * 1024 * 1024) } },
      }),
    })
    t.equal(huge.status, 413, 'a body over proxy.maxInspectedBodyBytes')
    t.match(
      huge.json(),
      {
        jsonrpc: '2.0',
        id: null,
        error: { code: -32009, data: { code: 'payload_too_large', limit: Number } },
      },
      'answered as a JSON-RPC error, not plain JSON',
    )
    // Refused on its declared size, an Expect: 100-continue body is never asked for; one that
    // fits is (the same request, a short title).
    const call = (title: string) =>
      JSON.stringify({
        jsonrpc: '2.0',
        id: 2,
        method: 'tools/call',
        params: { name: 'create_issue', arguments: { repo: 'a/b', title } },
      })
    const held = await agentRequestExpectingContinue(
      bench.port,
      '/sys_github/mcp',
      call('x'.repeat(2 * 1024 * 1024)),
    )
    t.match(held, { status: 413, continued: false }, 'no 100 Continue for a body refused on its size')
    t.match(JSON.parse(held.reply), { error: { code: -32009, data: { code: 'payload_too_large' } } })
    t.equal(toolCalls(), before)
    const small = await agentRequestExpectingContinue(bench.port, '/sys_github/mcp', call('short'))
    t.equal(small.continued, true, 'a body that fits is asked for')
    t.equal(toolCalls(), before + 1, 'and forwarded once decided')
    const alive = await client.listTools()
    t.ok(alive.tools.length > 0, 'the proxy still serves the session')
  })

  t.test('ending the session (DELETE) passes as a read', async (t) => {
    const sessionEnded = mcp.seen.length
    const transport = (client as unknown as { transport: StreamableHTTPClientTransport }).transport
    await transport.terminateSession()
    t.equal(mcp.seen.at(-1)?.method, 'DELETE')
    t.equal(mcp.seen.length, sessionEnded + 1, 'the DELETE reached the server')
  })
})
