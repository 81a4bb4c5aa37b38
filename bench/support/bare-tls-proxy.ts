/**
 * The TLS benchmark's baseline: a CONNECT proxy that terminates TLS with a leaf minted on the fly
 * from the same interception CA (the same minter gate-proxy uses) and forwards with http-proxy-3
 * over gate-proxy's own keep-alive upstream agent (the upstream's CA parsed once into a shared
 * secure context): everything gate-proxy does to TLS, nothing of the gate.
 * Run: tsx bench/support/bare-tls-proxy.ts <upstream origin> <upstream CA file> <CA cert file> <CA key file>
 */
import { readFileSync } from 'node:fs'
import { createServer } from 'node:http'
import type { Socket } from 'node:net'
import { TLSSocket } from 'node:tls'
import { createProxyServer } from 'http-proxy-3'
import { createUpstreamAgent } from '../../src/proxy/upstream-agent.js'
import { loadInterceptionCa } from '../../src/tls/interception-ca.js'
import { createLeafMinter } from '../../src/tls/leaf-minter.js'

const [origin, upstreamCa, caCert, caKey] = process.argv.slice(2) as [string, string, string, string]
const minter = await createLeafMinter(
  await loadInterceptionCa(readFileSync(caCert, 'utf8'), readFileSync(caKey, 'utf8')),
  { ttlSeconds: 3600, cacheSize: 16 },
)
const forward = createProxyServer({
  target: origin,
  changeOrigin: true,
  agent: createUpstreamAgent(new URL(origin), 30_000, readFileSync(upstreamCa, 'utf8')),
})
// As gate-proxy (and any proxy: RFC 9110 §7.6.1), Connection is hop-by-hop: a client's
// `Connection: close` ends its own connection, not the proxy's kept-alive one to the upstream,
// which would otherwise cost every new tunnel an upstream handshake too. The answer says what
// Node decided for the client's connection, as gate-proxy's does.
forward.on('proxyRes', (proxyRes, _req, res) => {
  proxyRes.headers.connection = (res as unknown as { shouldKeepAlive: boolean }).shouldKeepAlive
    ? 'keep-alive'
    : 'close'
})
forward.on('error', (_e, _q, res) => {
  if ('writeHead' in res && !res.headersSent) res.writeHead(502)
  res.end()
})
const server = createServer((req, res) => {
  delete req.headers.connection
  forward.web(req, res)
})
server.keepAliveTimeout = 65_000
server.on('connect', async (req, socket: Socket) => {
  socket.on('error', () => socket.destroy())
  const context = await minter.contextFor((req.url ?? '').split(':')[0] as string)
  socket.write('HTTP/1.1 200 Connection Established\r\n\r\n')
  const tls = new TLSSocket(socket, { isServer: true, secureContext: context, ALPNProtocols: ['http/1.1'] })
  tls.on('error', () => tls.destroy())
  tls.once('secure', () => server.emit('connection', tls))
})
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`${JSON.stringify({ port: (server.address() as { port: number }).port })}\n`)
})
process.on('SIGTERM', () => process.exit(0))
