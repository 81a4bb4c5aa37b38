/**
 * Load for the MCP benchmark, in its own process: autocannon sending `tools/call` requests on
 * one MCP session, each with its own JSON-RPC id (the server maps answers by id), checking
 * every answer is a tool result. Prints one JSON line: calls per second, errors, latencies.
 * Run: tsx bench/support/mcp-load.ts <url> <session id> <seconds> <connections>
 */
import autocannon from 'autocannon'

const [url, session, seconds, connections] = process.argv.slice(2) as [string, string, string, string]
let id = 0
let refused = 0
const result = await autocannon({
  url,
  method: 'POST',
  duration: Number(seconds),
  connections: Number(connections),
  headers: {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-session-id': session,
    'mcp-protocol-version': '2025-06-18',
  },
  requests: [
    {
      setupRequest: (req) => {
        id++
        req.body = JSON.stringify({
          jsonrpc: '2.0',
          id,
          method: 'tools/call',
          params: { name: 'create_issue', arguments: { repo: `acme/r${id % 64}`, title: 't' } },
        })
        return req
      },
      onResponse: (status, body) => {
        if (status !== 200 || !body.includes('"result"') || body.includes('"isError":true')) refused++
      },
    },
  ],
})
process.stdout.write(
  `${JSON.stringify({
    rps: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    errors: result.errors + result.timeouts + result.non2xx + refused,
  })}\n`,
)
