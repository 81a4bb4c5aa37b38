import { createServer, request } from 'node:http'
import { type AddressInfo, connect } from 'node:net'
import { gzipSync } from 'node:zlib'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { McpError } from '@modelcontextprotocol/sdk/types.js'
import t, { type Test } from 'tap'
import type { SystemsFile } from '../../src/config/systems.js'
import { startBillingProxy } from '../helpers/billing-proxy.js'
import { startMcpUpstream } from '../helpers/mcp-server.js'
import { agentRequest } from '../helpers/proxy.js'

/**
 * Issue 16: `filterToolsList`. An agent is never offered a tool it may not call: tools/list
 * answers (an event stream or JSON, from the real SDK server) leave out the tools whose verb
 * its policy denies and those no route maps, under the tenant's current policy. An answer the
 * proxy cannot read to filter is not relayed.
 */

const TOOL_ROUTES = [
  { name: 'create_issue', verb: 'verify', target: '{arguments.repo}' },
  { name: 'merge_*', verb: 'refund', target: '{arguments.repo}' },
  { name: 'delete_*', verb: 'repo.delete', target: '{arguments.repo}' },
]

const mcpSystem = (systemId: string, upstream: string, filterToolsList = true) => ({
  systemId,
  kind: 'mcp' as const,
  upstream,
  reads: 'pass' as const,
  routes: [],
  tools: [],
  mcp: { endpoint: '/mcp', filterToolsList, tools: TOOL_ROUTES },
})

/** An MCP endpoint that answers whatever the test sets, and records what reached it. */
async function startScriptedUpstream(t: Test) {
  const seen: { method: string; headers: Record<string, unknown> }[] = []
  let answer: (res: import('node:http').ServerResponse) => void = (res) => res.end()
  const server = createServer((req, res) => {
    seen.push({ method: req.method ?? '', headers: req.headers })
    req.resume()
    req.on('end', () => answer(res))
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  t.teardown(() => {
    server.closeAllConnections()
    server.close()
  })
  return {
    origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    answer(f: typeof answer) {
      answer = f
    },
  }
}

const toolsResult = (id: number) => ({
  jsonrpc: '2.0',
  id,
  result: {
    tools: ['create_issue', 'merge_pull_request', 'delete_repository', 'transfer_repository'].map((name) => ({
      name,
      inputSchema: { type: 'object' },
    })),
  },
})
const LIST = JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/list' })
const MCP_HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' }

t.test('tools/list answers leave out what the agent may not call', async (t) => {
  const streamed = await startMcpUpstream(t)
  const json = await startMcpUpstream(t, { jsonResponse: true })
  const scripted = await startScriptedUpstream(t)
  const bench = await startBillingProxy(t, {
    systems: (): SystemsFile => ({
      passthrough: [],
      systems: [
        mcpSystem('sys_github', streamed.origin),
        mcpSystem('sys_github_json', json.origin),
        mcpSystem('sys_unfiltered', json.origin, false),
        mcpSystem('sys_scripted', scripted.origin),
        // With a credential, its answers are also searched for it (an echo guard): a compressed
        // one is still this filter's to refuse, in MCP's terms.
        {
          ...mcpSystem('sys_scripted_credential', scripted.origin),
          credential: { header: 'authorization', prefix: 'Bearer ', fromEnv: 'BILLING_TOKEN' },
        },
      ],
    }),
    verbs: ['repo.delete'],
  })
  const admin = { bearer: bench.tenant.apiKey }
  const connect = async (systemId: string) => {
    const client = new Client({ name: 'agent', version: '1.0.0' })
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${bench.port}/${systemId}/mcp`)),
    )
    t.teardown(() => client.close())
    return client
  }
  const listed = async (client: Client) => (await client.listTools()).tools.map((x) => x.name).sort()

  t.test('event stream and JSON answers alike: denied and unmapped tools are left out', async (t) => {
    for (const systemId of ['sys_github', 'sys_github_json']) {
      const client = await connect(systemId)
      t.same(
        await listed(client),
        ['create_issue', 'merge_pull_request'],
        `${systemId}: delete_repository (policy deny) and transfer_repository (no route) are not offered`,
      )
      // What is offered still works, through the same session.
      const r = await client.callTool({ name: 'create_issue', arguments: { repo: 'acme/api', title: 't' } })
      t.same(r.content, [{ type: 'text', text: 'created "t" in acme/api' }], systemId)
    }
    const unfiltered = await connect('sys_unfiltered')
    t.same((await listed(unfiltered)).length, 4, 'without filterToolsList every tool is listed')
  })

  t.test('the filter follows the policy as it changes; STEP_UP and require_grant tools stay', async (t) => {
    const client = await connect('sys_github')
    t.equal(
      (await bench.api.put('/v1/policy', { verify: 'deny', refund: 'require_grant' }, admin)).status,
      200,
    )
    t.same(await listed(client), ['merge_pull_request'], 'create_issue is gone once verify is denied')
    t.equal(
      (await bench.api.put('/v1/policy', { verify: 'allow', 'repo.delete': 'step_up' }, admin)).status,
      200,
    )
    t.same(await listed(client), ['create_issue', 'delete_repository', 'merge_pull_request'])
    t.equal(
      (await bench.api.put('/v1/policy', { refund: 'step_up', 'repo.delete': 'deny' }, admin)).status,
      200,
    )
    t.same(await listed(client), ['create_issue', 'merge_pull_request'])
  })

  t.test('a revoked agent is offered no tool; reinstated, it is offered them again', async (t) => {
    const client = await connect('sys_github')
    const sponsor = { bearer: bench.tenant.sponsorToken }
    t.equal((await bench.api.post('/v1/revoke', { all: true }, sponsor)).status, 200)
    t.same(await listed(client), [], 'every tool would be DENY (sponsor_revoked_tenant)')
    t.equal((await bench.api.post('/v1/reinstate', { all: true }, sponsor)).status, 200)
    t.same(await listed(client), ['create_issue', 'merge_pull_request'])
  })

  t.test('a tools/list batched with an allowed call: the call runs and the list is filtered', async (t) => {
    const client = await connect('sys_github_json')
    const sessionId = (client as unknown as { transport: StreamableHTTPClientTransport }).transport.sessionId
    const r = await agentRequest(bench.port, {
      method: 'POST',
      path: '/sys_github_json/mcp',
      headers: { ...MCP_HEADERS, 'mcp-session-id': sessionId ?? '', 'mcp-protocol-version': '2025-06-18' },
      body: JSON.stringify([
        { jsonrpc: '2.0', id: 1, method: 'tools/list' },
        {
          jsonrpc: '2.0',
          id: 2,
          method: 'tools/call',
          params: { name: 'create_issue', arguments: { repo: 'a/b', title: 'x' } },
        },
      ]),
    })
    t.equal(r.status, 200, r.body.toString())
    const answers = r.json() as { id: number; result: { tools?: { name: string }[] } }[]
    const list = answers.find((a) => a.id === 1)
    t.same(list?.result.tools?.map((x) => x.name).sort(), ['create_issue', 'merge_pull_request'])
    t.ok(json.executed.includes('create_issue:a/b'), 'the allowed call was forwarded')
  })

  t.test(
    'the request goes out without Accept-Encoding; a resumed event stream (GET) is filtered too',
    async (t) => {
      scripted.answer((res) => {
        res.writeHead(200, { 'content-type': 'text/event-stream' })
        // CRLF line ends split across writes, an id-only event and a comment: all relayed as sent.
        res.write(': keep-alive\r\n\r\nid: 41\r')
        res.write('\n\r\nid: 42\r\nevent: message\r\ndata: ')
        res.write(`${JSON.stringify(toolsResult(7))}\r\n\r\n`)
        res.end(
          `data: ${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/message', params: {} })}\n\n`,
        )
      })
      const get = await agentRequest(bench.port, {
        method: 'GET',
        path: '/sys_scripted/mcp',
        headers: { accept: 'text/event-stream', 'accept-encoding': 'gzip', 'last-event-id': '40' },
      })
      t.equal(get.status, 200)
      t.notOk('accept-encoding' in (scripted.seen.at(-1)?.headers ?? {}), 'asked for the answer uncompressed')
      const text = get.body.toString()
      t.ok(text.startsWith(': keep-alive\r\n\r\nid: 41\r\n\r\n'), 'unchanged events pass byte for byte')
      t.match(text, /id: 42\r\nevent: message\r\ndata: \{/, 'the rewritten event keeps its id and type')
      const data = /data: (\{.*"tools".*\})\n/.exec(text)?.[1]
      t.same(
        (JSON.parse(data ?? '{}') as ReturnType<typeof toolsResult>).result.tools.map((x) => x.name),
        ['create_issue', 'merge_pull_request'],
      )
      t.match(text, /notifications\/message/, 'later events follow')
    },
  )

  t.test('an answer the proxy cannot read to filter is not relayed', async (t) => {
    const cases: [string, (res: import('node:http').ServerResponse) => void][] = [
      [
        'compressed',
        (res) => {
          res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip' })
          res.end(gzipSync(JSON.stringify(toolsResult(7))))
        },
      ],
      ['not JSON', (res) => res.writeHead(200, { 'content-type': 'application/json' }).end('{"jsonrpc":')],
      ['neither JSON nor a stream', (res) => res.writeHead(200, { 'content-type': 'text/html' }).end('<p>')],
      [
        // JSON.parse reads it; serialising the filtered list again would exhaust the stack.
        'nested too deep to serialise again',
        (res) => {
          const deep = `${'['.repeat(20_000)}${']'.repeat(20_000)}`
          const text = JSON.stringify(toolsResult(7)).replace('{"type":"object"}', deep)
          res.writeHead(200, { 'content-type': 'application/json' }).end(text)
        },
      ],
      [
        'over 16 MiB',
        (res) => {
          res.writeHead(200, { 'content-type': 'application/json' })
          const tools = toolsResult(7)
          ;(tools.result.tools[0] as Record<string, unknown>).description = 'x'.repeat(17 * 1024 * 1024)
          res.end(JSON.stringify(tools))
        },
      ],
    ]
    const credentialed = cases
      .slice(0, 1)
      .map(([name, answer]) => [`${name}, with a credential`, answer, true] as const)
    for (const [name, answer, credential] of [
      ...cases.map(([n, a]) => [n, a, false] as const),
      ...credentialed,
    ]) {
      scripted.answer(answer)
      const r = await agentRequest(bench.port, {
        method: 'POST',
        path: credential ? '/sys_scripted_credential/mcp' : '/sys_scripted/mcp',
        headers: MCP_HEADERS,
        body: LIST,
      })
      t.equal(r.status, 200, name)
      if (credential) t.equal(scripted.seen.at(-1)?.headers.authorization, 'Bearer up-secret', name)
      t.match(
        r.json(),
        {
          jsonrpc: '2.0',
          id: 7,
          error: { code: -32010, data: { code: 'tools_list_unfilterable', decision: 'DENY' } },
        },
        name,
      )
      t.notMatch(r.body.toString(), /delete_repository/, `${name}: nothing of the answer reaches the agent`)
    }
    scripted.answer((res) => res.writeHead(200, { 'content-type': 'text/html' }).end('<p>'))
    const stream = await agentRequest(bench.port, {
      method: 'GET',
      path: '/sys_scripted/mcp',
      headers: { accept: 'text/event-stream' },
    })
    t.equal(stream.status, 502, 'a GET stream that cannot be read: no request id to answer by')
    t.match(stream.json(), {
      jsonrpc: '2.0',
      id: null,
      error: { code: -32010, data: { code: 'tools_list_unfilterable', decision: 'DENY', status: 502 } },
    })
    scripted.answer((res) => res.writeHead(200, { 'content-type': 'text/plain' }).end('session ended'))
    const ended = await agentRequest(bench.port, { method: 'DELETE', path: '/sys_scripted/mcp' })
    t.same(
      [ended.status, ended.body.toString()],
      [200, 'session ended'],
      "a DELETE's answer is not JSON-RPC: it passes as it is",
    )
    scripted.answer((res) => res.writeHead(404, { 'content-type': 'text/plain' }).end('no such session'))
    const notFound = await agentRequest(bench.port, {
      method: 'POST',
      path: '/sys_scripted/mcp',
      headers: MCP_HEADERS,
      body: LIST,
    })
    t.same(
      [notFound.status, notFound.body.toString()],
      [404, 'no such session'],
      'an error answer passes as it is',
    )
  })

  t.test('an event stream that turns unreadable is cut, after what was already relayed', async (t) => {
    scripted.answer((res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' })
      res.write(
        `data: ${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/progress', params: {} })}\n\n`,
      )
      setTimeout(() => res.end(`data: ${JSON.stringify(toolsResult(7)).slice(0, 40)}\n\n`), 20)
    })
    const got = await new Promise<{ text: string; complete: boolean }>((resolve) => {
      const req = request(
        {
          host: '127.0.0.1',
          port: bench.port,
          method: 'POST',
          path: '/sys_scripted/mcp',
          headers: MCP_HEADERS,
          agent: false,
        },
        (res) => {
          let text = ''
          res.setEncoding('utf8')
          res.on('data', (c: string) => {
            text += c
          })
          res.on('error', () => {})
          res.on('close', () => resolve({ text, complete: res.complete }))
        },
      )
      req.end(LIST)
    })
    t.match(got.text, /notifications\/progress/, 'the readable event went through')
    t.notMatch(got.text, /"tools"/, 'the unreadable one did not')
    t.equal(got.complete, false, 'the stream was cut, not ended as if whole')
    const still = await listed(await connect('sys_github'))
    t.ok(still.length > 0, 'the proxy goes on serving')
  })
})

t.test('McpError is what the SDK raises for the refusal', async (t) => {
  const scripted = await startScriptedUpstream(t)
  const bench = await startBillingProxy(t, {
    systems: (): SystemsFile => ({ passthrough: [], systems: [mcpSystem('sys_scripted', scripted.origin)] }),
    verbs: ['repo.delete'],
  })
  scripted.answer((res) => {
    res.writeHead(200, { 'content-type': 'application/json', 'mcp-session-id': 's1' })
    res.end(
      JSON.stringify({
        jsonrpc: '2.0',
        id: 0,
        result: {
          protocolVersion: '2025-06-18',
          capabilities: { tools: {} },
          serverInfo: { name: 's', version: '1' },
        },
      }),
    )
  })
  const client = new Client({ name: 'agent', version: '1.0.0' })
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${bench.port}/sys_scripted/mcp`)),
  )
  t.teardown(() => client.close())
  scripted.answer((res) => res.writeHead(200, { 'content-type': 'text/html' }).end('<p>'))
  const err = await client.listTools().then(
    () => null,
    (e: unknown) => e,
  )
  t.ok(err instanceof McpError, String(err))
  t.equal((err as McpError).code, -32010)
})

t.test('a filtered stream to an agent that does not read holds the upstream back', async (t) => {
  const scripted = await startScriptedUpstream(t)
  const bench = await startBillingProxy(t, {
    systems: (): SystemsFile => ({ passthrough: [], systems: [mcpSystem('sys_scripted', scripted.origin)] }),
    verbs: ['repo.delete'],
  })
  const event = `data: ${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/message', params: { data: 'x'.repeat(1000) } })}\n\n`
  const LIMIT = 64 * 1024 * 1024
  const held = new Promise<{ written: number; heldBack: boolean; ended: boolean }>((resolve) => {
    scripted.answer((res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' })
      let written = 0
      let stalled: NodeJS.Timeout | undefined
      // Writes as fast as it is let; held back once nothing drains for a second.
      const more = () => {
        clearTimeout(stalled)
        while (written < LIMIT) {
          written += event.length
          if (!res.write(event)) {
            stalled = setTimeout(() => resolve({ written, heldBack: true, ended: false }), 1000)
            res.once('drain', more)
            return
          }
        }
        resolve({ written, heldBack: false, ended: true })
      }
      res.on('error', () => {})
      more()
    })
  })
  // An agent that sends its GET and never reads a byte of the answer.
  const socket = connect(bench.port, '127.0.0.1')
  socket.on('error', () => {})
  socket.write('GET /sys_scripted/mcp HTTP/1.1\r\nhost: x\r\naccept: text/event-stream\r\n\r\n')
  socket.pause()
  const r = await held
  t.ok(r.heldBack, `the upstream was held back (it had written ${(r.written / 1048576).toFixed(1)} MiB)`)
  t.ok(r.written < 32 * 1024 * 1024, 'before the proxy had read 32 MiB of it into memory')
  socket.destroy()
  const health = await fetch(`http://127.0.0.1:${bench.port}/healthz`)
  t.equal(health.status, 200)
})
