/**
 * The MCP benchmark's upstream: the SDK's McpServer over its Streamable HTTP transport
 * (stateful, one session per initialize, answers as SSE, the SDK's default), with one tool.
 */
import { randomUUID } from 'node:crypto'
import { createServer } from 'node:http'
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js'
import { z } from 'zod'

const transports = new Map<string, StreamableHTTPServerTransport>()
const server = createServer(async (req, res) => {
  const sid = req.headers['mcp-session-id']
  let transport = typeof sid === 'string' ? transports.get(sid) : undefined
  if (!transport) {
    const created = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => {
        transports.set(id, created)
      },
    })
    const mcp = new McpServer({ name: 'bench', version: '1.0.0' })
    mcp.registerTool(
      'create_issue',
      { description: 'Open an issue', inputSchema: { repo: z.string(), title: z.string() } },
      async ({ repo, title }) => ({
        content: [{ type: 'text' as const, text: `created "${title}" in ${repo}` }],
      }),
    )
    await mcp.connect(created)
    transport = created
  }
  await transport.handleRequest(req, res)
})
server.keepAliveTimeout = 65_000
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`${JSON.stringify({ port: (server.address() as { port: number }).port })}\n`)
})
process.on('SIGTERM', () => process.exit(0))
