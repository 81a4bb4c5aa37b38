import { randomUUID } from 'node:crypto'
import { createServer, type IncomingHttpHeaders } from 'node:http'
import type { AddressInfo } from 'node:net'
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js'
import type { Test } from 'tap'
import { z } from 'zod'

export interface McpUpstream {
  origin: string
  /** `tool:repo` for each tool the server ran. */
  executed: string[]
  /** Every HTTP request that reached the server. */
  seen: { method: string; url: string; headers: IncomingHttpHeaders }[]
}

/**
 * A real MCP server (the SDK's McpServer over its Streamable HTTP transport, stateful: one
 * session per initialize), with a few GitHub-like tools that record when they run. It answers
 * a POST with an event stream, or with `jsonResponse` as application/json.
 */
export async function startMcpUpstream(t: Test, opts: { jsonResponse?: boolean } = {}): Promise<McpUpstream> {
  const executed: string[] = []
  const seen: McpUpstream['seen'] = []
  const transports = new Map<string, StreamableHTTPServerTransport>()
  const newServer = () => {
    const server = new McpServer({ name: 'github-like', version: '1.0.0' })
    const text = (s: string) => ({ content: [{ type: 'text' as const, text: s }] })
    server.registerTool(
      'create_issue',
      { description: 'Open an issue', inputSchema: { repo: z.string(), title: z.string() } },
      async ({ repo, title }) => {
        executed.push(`create_issue:${repo}`)
        return text(`created "${title}" in ${repo}`)
      },
    )
    server.registerTool(
      'merge_pull_request',
      { description: 'Merge a pull request', inputSchema: { repo: z.string(), number: z.number() } },
      async ({ repo, number }) => {
        executed.push(`merge_pull_request:${repo}#${number}`)
        return text(`merged ${repo}#${number}`)
      },
    )
    server.registerTool(
      'delete_repository',
      { description: 'Delete a repository', inputSchema: { repo: z.string() } },
      async ({ repo }) => {
        executed.push(`delete_repository:${repo}`)
        return text(`deleted ${repo}`)
      },
    )
    server.registerTool(
      'transfer_repository',
      { description: 'Transfer a repository', inputSchema: { repo: z.string(), to: z.string() } },
      async ({ repo }) => {
        executed.push(`transfer_repository:${repo}`)
        return text(`transferred ${repo}`)
      },
    )
    return server
  }
  const http = createServer(async (req, res) => {
    seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers })
    const sid = req.headers['mcp-session-id']
    let transport = typeof sid === 'string' ? transports.get(sid) : undefined
    if (!transport) {
      if (typeof sid === 'string') {
        res.writeHead(404, { 'content-type': 'application/json' }).end(
          JSON.stringify({
            jsonrpc: '2.0',
            id: null,
            error: { code: -32001, message: 'Session not found' },
          }),
        )
        return
      }
      const created = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        // Answers as application/json instead of an event stream per POST.
        enableJsonResponse: opts.jsonResponse === true,
        onsessioninitialized: (id) => {
          transports.set(id, created)
        },
      })
      await newServer().connect(created)
      transport = created
    }
    await transport.handleRequest(req, res)
  })
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve))
  t.teardown(async () => {
    await Promise.all([...transports.values()].map((tr) => tr.close().catch(() => {})))
    http.closeAllConnections()
    await new Promise((resolve) => http.close(resolve))
  })
  return { origin: `http://127.0.0.1:${(http.address() as AddressInfo).port}`, executed, seen }
}
