/** The baseline: a bare http-proxy-3 pass-through with a keep-alive agent, no gate. */
import { Agent, createServer } from 'node:http'
import { createProxyServer } from 'http-proxy-3'

const target = process.argv[2] as string
/** The path prefix gate-proxy routes by (a system id), stripped here as gate-proxy strips it. */
const prefix = process.argv[3] ?? '/sys_billing'
const agent = new Agent({ keepAlive: true, maxSockets: 256, maxFreeSockets: 64, scheduling: 'lifo' })
const proxy = createProxyServer({ target, agent, changeOrigin: true })
proxy.on('error', (_err, _req, res) => {
  if ('writeHead' in res && !res.headersSent) res.writeHead(502)
  res.end()
})
const server = createServer((req, res) => {
  const url = req.url ?? '/'
  req.url = url.startsWith(prefix) ? url.slice(prefix.length) || '/' : url
  proxy.web(req, res)
})
server.keepAliveTimeout = 65_000
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`${JSON.stringify({ port: (server.address() as { port: number }).port })}\n`)
})
// Exit normally on SIGTERM, so `--cpu-prof` can write its profile.
process.on('SIGTERM', () => process.exit(0))
