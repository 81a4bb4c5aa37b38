/**
 * Gated HTTPS writes through TLS interception vs a bare TLS-terminating pass-through (issue 17).
 * In one process and one run: a real HTTPS upstream; the bare baseline, a CONNECT proxy that
 * terminates TLS with the same minted leaf and forwards with http-proxy-3 (everything gate-proxy
 * does to TLS, nothing of the gate); and a standalone gate-proxy with interception on Redis, its
 * control plane on Postgres in the same process (as bench:proxy's shared mode). Three measures:
 *   1. keep-alive throughput (tunnels reused), `--connections` tunnels, alternating rounds: the ratio;
 *   2. a new tunnel per write, without and with TLS session resumption: mean latency;
 *   3. the handshake cost per new connection: (2) minus a keep-alive write's latency.
 * Run: npx tsx bench/tls.ts [--seconds 3] [--rounds 5] [--connections 8] [--fresh 100]
 */

import { mkdtempSync, writeFileSync } from 'node:fs'
import { createServer, request as httpRequest } from 'node:http'
import { Agent as HttpsAgent } from 'node:https'
import type { AddressInfo, Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type TLSSocket as ClientTls, type SecureContext, TLSSocket, connect as tlsConnect } from 'node:tls'
import { createProxyServer } from 'http-proxy-3'
import type { Test } from 'tap'
import { ProxyAgent, request } from 'undici'
import { createInterceptionCa, loadInterceptionCa } from '../src/tls/interception-ca.js'
import { createLeafMinter } from '../src/tls/leaf-minter.js'
import { startFleet } from '../test/helpers/fleet.js'
import { startHttpsUpstream } from '../test/helpers/https-upstream.js'

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`)
  return i > 0 ? Number(process.argv[i + 1]) : fallback
}
const SECONDS = arg('seconds', 3)
const ROUNDS = arg('rounds', 5)
const CONNECTIONS = arg('connections', 8)
const FRESH = arg('fresh', 100)

const cleanups: (() => unknown)[] = []
const t = { teardown: (fn: () => unknown) => cleanups.push(fn) } as unknown as Test

const upstream = await startHttpsUpstream(t)
const dir = mkdtempSync(join(tmpdir(), 'wg-bench-tls-'))
const made = await createInterceptionCa({ hosts: ['localhost'], days: 1 })
writeFileSync(join(dir, 'ca.crt'), made.certPem)
writeFileSync(join(dir, 'ca.key'), made.keyPem, { mode: 0o600 })

// gate-proxy as a sidecar runs it: standalone, on Redis, its control plane on Postgres (here in
// the same process, which the bare path does not have to share the CPU with).
const fleet = await startFleet(t, {
  proxies: 1,
  quota: 100_000_000,
  systems: () => ({
    passthrough: [],
    systems: [
      {
        systemId: 'sys_billing',
        kind: 'http' as const,
        upstream: upstream.origin,
        caBundle: upstream.caPem,
        reads: 'pass' as const,
        routes: [{ method: 'POST' as const, path: '/v1/checks', verb: 'verify' }],
        tools: [],
      },
    ],
  }),
  proxySettings: { tls: { caCertFile: join(dir, 'ca.crt'), caKeyFile: join(dir, 'ca.key') } },
})
const gated = { port: fleet.proxies[0]?.port as number }
// The bare baseline: the same TLS termination (a leaf from the same kind of minter), then http-proxy-3.
const minter = await createLeafMinter(await loadInterceptionCa(made.certPem, made.keyPem), {
  ttlSeconds: 3600,
  cacheSize: 16,
})
const forward = createProxyServer({
  target: upstream.origin,
  changeOrigin: true,
  agent: new HttpsAgent({ keepAlive: true, maxSockets: 256, ca: upstream.caPem }),
})
forward.on('error', (_e, _q, res) => {
  if ('writeHead' in res && !res.headersSent) res.writeHead(502)
  res.end()
})
const bare = createServer((req, res) => forward.web(req, res))
bare.on('connect', async (req, socket: Socket) => {
  const context: SecureContext = await minter.contextFor((req.url ?? '').split(':')[0] as string)
  socket.write('HTTP/1.1 200 Connection Established\r\n\r\n')
  const tls = new TLSSocket(socket, { isServer: true, secureContext: context, ALPNProtocols: ['http/1.1'] })
  tls.on('error', () => tls.destroy())
  tls.once('secure', () => bare.emit('connection', tls))
})
await new Promise<void>((resolve) => bare.listen(0, '127.0.0.1', resolve))
cleanups.push(() => new Promise((resolve) => bare.close(resolve)))
const barePort = (bare.address() as AddressInfo).port

const target = `https://localhost:${upstream.port}/v1/checks`
const body = '{"amount":5}'

/** Writes per second over kept-alive tunnels through `proxyPort`. */
async function keepAlive(proxyPort: number, seconds: number): Promise<number> {
  const agent = new ProxyAgent({
    uri: `http://127.0.0.1:${proxyPort}`,
    requestTls: { ca: made.certPem },
    connections: CONNECTIONS,
  })
  const end = performance.now() + seconds * 1000
  let done = 0
  const worker = async () => {
    while (performance.now() < end) {
      const r = await request(target, {
        method: 'POST',
        body,
        headers: { 'content-type': 'application/json' },
        dispatcher: agent,
      })
      await r.body.text()
      if (r.statusCode !== 200) throw new Error(`status ${r.statusCode}`)
      done++
    }
  }
  await Promise.all(Array.from({ length: CONNECTIONS * 2 }, worker))
  await agent.close()
  return done / seconds
}

/** One write on a new tunnel and TLS connection; resumes `session` when given. Returns [ms, session]. */
function fresh(proxyPort: number, session?: Buffer): Promise<[number, Buffer | undefined]> {
  const t0 = performance.now()
  return new Promise((resolve, reject) => {
    httpRequest({ host: '127.0.0.1', port: proxyPort, method: 'CONNECT', path: `localhost:${upstream.port}` })
      .on('connect', (_res, socket) => {
        let next: Buffer | undefined
        const tls: ClientTls = tlsConnect({ socket, servername: 'localhost', ca: made.certPem, session })
        tls.on('session', (s) => (next = s))
        tls.on('error', reject)
        tls.once('secureConnect', () => {
          tls.write(
            `POST /v1/checks HTTP/1.1\r\nHost: localhost:${upstream.port}\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\nconnection: close\r\n\r\n${body}`,
          )
        })
        let text = ''
        tls.on('data', (d) => (text += d))
        tls.on('end', () => {
          if (!text.startsWith('HTTP/1.1 200')) return reject(new Error(text.slice(0, 80)))
          resolve([performance.now() - t0, next ?? session])
        })
      })
      .on('error', reject)
      .end()
  })
}

/** Mean latency of sequential writes over one kept-alive tunnel: the baseline of a handshake's cost. */
async function keptMean(proxyPort: number): Promise<number> {
  const agent = new ProxyAgent({
    uri: `http://127.0.0.1:${proxyPort}`,
    requestTls: { ca: made.certPem },
    connections: 1,
  })
  const once = async () => {
    const r = await request(target, {
      method: 'POST',
      body,
      headers: { 'content-type': 'application/json' },
      dispatcher: agent,
    })
    await r.body.text()
  }
  await once()
  const t0 = performance.now()
  for (let i = 0; i < FRESH; i++) await once()
  const mean = (performance.now() - t0) / FRESH
  await agent.close()
  return mean
}

async function freshMean(proxyPort: number, resume: boolean): Promise<number> {
  let session: Buffer | undefined
  let total = 0
  for (let i = 0; i < FRESH; i++) {
    const [ms, s] = await fresh(proxyPort, resume ? session : undefined)
    session = s
    total += ms
  }
  return total / FRESH
}

console.log(
  `HTTPS writes, ${CONNECTIONS} tunnels, ${ROUNDS} alternating rounds of ${SECONDS} s, node ${process.version}`,
)
await keepAlive(barePort, 1)
await keepAlive(gated.port, 1)
const ratios: number[] = []
for (let i = 0; i < ROUNDS; i++) {
  const b = await keepAlive(barePort, SECONDS)
  const g = await keepAlive(gated.port, SECONDS)
  ratios.push(g / b)
  console.log(
    `round ${i + 1}: bare ${b.toFixed(0)}/s   gated ${g.toFixed(0)}/s   gated/bare ${(g / b).toFixed(2)}`,
  )
}
ratios.sort((a, b) => a - b)
const median = ratios[Math.floor(ratios.length / 2)] as number
for (const [name, port] of [
  ['bare', barePort],
  ['gated', gated.port],
] as const) {
  const kept = await keptMean(port)
  const cold = await freshMean(port, false)
  const resumed = await freshMean(port, true)
  console.log(
    `${name}: one at a time, kept-alive tunnel ${kept.toFixed(2)} ms; new tunnel ${cold.toFixed(2)} ms, with session resumption ${resumed.toFixed(2)} ms; handshake cost per new connection ≈ ${(cold - kept).toFixed(2)} ms full, ${(resumed - kept).toFixed(2)} ms resumed`,
  )
}
console.log(
  `gated/bare (keep-alive) median ${median.toFixed(2)} (range ${ratios[0]?.toFixed(2)}–${ratios.at(-1)?.toFixed(2)})`,
)
console.log(`target: gated/bare >= 0.8 → ${median >= 0.8 ? 'met' : 'NOT met'}`)
for (const fn of cleanups.reverse()) await fn()
process.exit(0)
