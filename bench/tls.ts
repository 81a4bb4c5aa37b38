/**
 * Gated HTTPS writes through TLS interception vs a bare TLS-terminating pass-through (issue 17),
 * as a sidecar sees them (bench/support/sidecar-rig.ts): gate-proxy with interception and the
 * bare baseline (a CONNECT proxy terminating TLS with a leaf from the same minter, then
 * http-proxy-3: everything gate-proxy does to TLS, nothing of the gate) each get CPU 0 while
 * measured; the HTTPS upstream, the load (undici through CONNECT, this process), Redis and
 * Postgres share CPU 1; the control plane is paused during the rounds. Three measures:
 *   1. keep-alive throughput (tunnels reused), `--connections` tunnels, alternating rounds: the
 *      ratio, with each proxy's CPU per write beside it;
 *   2. a new tunnel per write, without and with TLS session resumption: mean latency, the two
 *      proxies in alternating blocks of ten writes;
 *   3. the handshake cost per new connection: (2) minus a keep-alive write's latency.
 * Each proxy first gets `--warmup` seconds of writes: the first seconds of a fresh process run
 * un-optimised code and cost both proxies up to 1.6× the CPU per write of later rounds.
 * Run: npx tsx bench/tls.ts [--seconds 3] [--rounds 5] [--connections 8] [--fresh 200] [--warmup 3]
 */

import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { request as httpRequest } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type TLSSocket as ClientTls, connect as tlsConnect } from 'node:tls'
import { Redis } from 'ioredis'
import { Agent, ProxyAgent, request } from 'undici'
import { createInterceptionCa } from '../src/tls/interception-ca.js'
import { cpuSplitMs } from './support/cpu-time.js'
import { startRig } from './support/sidecar-rig.js'

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`)
  return i > 0 ? Number(process.argv[i + 1]) : fallback
}
const SECONDS = arg('seconds', 3)
const ROUNDS = arg('rounds', 5)
const CONNECTIONS = arg('connections', 8)
const FRESH = Math.max(10, Math.round(arg('fresh', 200) / 10) * 10)
const WARMUP = arg('warmup', 3)

const dir = mkdtempSync(join(tmpdir(), 'wg-bench-tls-'))
const made = await createInterceptionCa({ hosts: ['localhost'], days: 1 })
writeFileSync(join(dir, 'ca.crt'), made.certPem)
writeFileSync(join(dir, 'ca.key'), made.keyPem, { mode: 0o600 })

const rig = await startRig()
try {
  const upstreamCaFile = join(dir, 'upstream-ca.crt')
  const upstream = await rig.start(['bench/support/https-upstream.ts', upstreamCaFile], 1)
  const upstreamPort = upstream.port
  const upstreamOrigin = `https://localhost:${upstreamPort}`
  await rig.api(
    '/v1/systems',
    {
      systemId: 'sys_billing',
      kind: 'http',
      upstream: upstreamOrigin,
      caBundle: readFileSync(upstreamCaFile, 'utf8'),
      credential: { header: 'authorization', prefix: 'Bearer ', fromEnv: 'BENCH_TOKEN' },
      reads: 'pass',
      routes: [{ method: 'POST', path: '/v1/checks', verb: 'verify' }],
      tools: [],
    },
    rig.tenant.apiKey,
  )
  const gated = await rig.startProxy({
    proxy: { tls: { caCertFile: join(dir, 'ca.crt'), caKeyFile: join(dir, 'ca.key') } },
  })
  const bare = await rig.start(
    [
      'bench/support/bare-tls-proxy.ts',
      upstreamOrigin,
      upstreamCaFile,
      join(dir, 'ca.crt'),
      join(dir, 'ca.key'),
    ],
    0,
  )
  const barePort = bare.port

  const target = `https://localhost:${upstreamPort}/v1/checks`
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
      httpRequest({
        host: '127.0.0.1',
        port: proxyPort,
        method: 'CONNECT',
        path: `localhost:${upstreamPort}`,
      })
        .on('connect', (_res, socket) => {
          let next: Buffer | undefined
          const tls: ClientTls = tlsConnect({ socket, servername: 'localhost', ca: made.certPem, session })
          tls.on('session', (s) => (next = s))
          tls.on('error', reject)
          tls.once('secureConnect', () => {
            tls.write(
              `POST /v1/checks HTTP/1.1\r\nHost: localhost:${upstreamPort}\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\nconnection: close\r\n\r\n${body}`,
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

  /**
   * Mean latency of one write per new tunnel through each proxy, `FRESH` each, sent in
   * alternating blocks of ten (bare, gated, bare, …) so the host's drift falls on both alike.
   */
  async function freshMeans(ports: { bare: number; gated: number }, resume: boolean) {
    const total = { bare: 0, gated: 0 }
    const session: { bare?: Buffer; gated?: Buffer } = {}
    for (let block = 0; block < FRESH / 10; block++)
      for (const name of ['bare', 'gated'] as const)
        for (let i = 0; i < 10; i++) {
          const [ms, s] = await fresh(ports[name], resume ? session[name] : undefined)
          session[name] = s
          total[name] += ms
        }
    return { bare: total.bare / FRESH, gated: total.gated / FRESH }
  }

  rig.pauseControlPlane()
  console.log(
    `HTTPS writes, ${CONNECTIONS} tunnels, ${ROUNDS} alternating rounds of ${SECONDS} s, node ${process.version}; proxies on CPU 0, load, upstream, Redis and Postgres on CPU 1, control plane paused`,
  )
  await keepAlive(barePort, WARMUP)
  await keepAlive(gated.port, WARMUP)
  /** Keep-alive writes per second straight to the upstream: this machine's direct figure. */
  const direct = async (seconds: number) => {
    const agent = new Agent({
      connect: { ca: readFileSync(upstreamCaFile, 'utf8') },
      connections: CONNECTIONS,
    })
    const end = performance.now() + seconds * 1000
    let done = 0
    const worker = async () => {
      while (performance.now() < end) {
        const r = await request(target, { method: 'POST', body, dispatcher: agent })
        await r.body.text()
        done++
      }
    }
    await Promise.all(Array.from({ length: CONNECTIONS * 2 }, worker))
    await agent.close()
    return done / seconds
  }
  console.log(`direct (straight to the upstream, this machine): ${(await direct(SECONDS)).toFixed(0)}/s`)
  const ratios: number[] = []
  const cpuRatios: number[] = []
  const addedCpu: number[] = []
  const redis = new Redis(process.env.WRITEGATE_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379')
  /** Script calls Redis has run so far: the gated proxy's commits (batched, so fewer than writes). */
  const scriptCalls = async () => {
    const stats = await redis.info('commandstats')
    let n = 0
    for (const m of stats.matchAll(/^cmdstat_(?:evalsha|eval):calls=(\d+)/gm)) n += Number(m[1])
    return n
  }
  /**
   * Keep-alive writes per second through `port`, that proxy's CPU µs per write (and of it the
   * kernel's, on its behalf), and writes per Redis script call.
   */
  const measured = async (port: number, pid: number | undefined) => {
    const calls = await scriptCalls()
    const before = pid ? cpuSplitMs(pid) : { user: 0, system: 0 }
    const rps = await keepAlive(port, SECONDS)
    const after = pid ? cpuSplitMs(pid) : { user: 0, system: 0 }
    const perWrite = (ms: number) => (ms * 1000) / (rps * SECONDS)
    const systemUs = perWrite(after.system - before.system)
    const cpuUs = perWrite(after.user - before.user) + systemUs
    return { rps, cpuUs, systemUs, perCall: (rps * SECONDS) / Math.max(1, (await scriptCalls()) - calls) }
  }
  for (let i = 0; i < ROUNDS; i++) {
    const b = await measured(barePort, bare.child.pid)
    const g = await measured(gated.port, gated.child.pid)
    ratios.push(g.rps / b.rps)
    cpuRatios.push(g.cpuUs / b.cpuUs)
    addedCpu.push(g.cpuUs - b.cpuUs)
    console.log(
      `round ${i + 1}: bare ${b.rps.toFixed(0)}/s (${b.cpuUs.toFixed(0)} µs CPU/write, ${b.systemUs.toFixed(0)} of it system)   gated ${g.rps.toFixed(0)}/s (${g.cpuUs.toFixed(0)} µs CPU/write, ${g.systemUs.toFixed(0)} of it system, ${g.perCall.toFixed(1)} writes per Redis call)   gated/bare ${(g.rps / b.rps).toFixed(2)}`,
    )
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number
  const range = (xs: number[]) => `${Math.min(...xs).toFixed(2)}–${Math.max(...xs).toFixed(2)}`
  const ports = { bare: barePort, gated: gated.port }
  const kept = { bare: await keptMean(barePort), gated: await keptMean(gated.port) }
  const cold = await freshMeans(ports, false)
  const resumed = await freshMeans(ports, true)
  for (const name of ['bare', 'gated'] as const)
    console.log(
      `${name}: one at a time, kept-alive tunnel ${kept[name].toFixed(2)} ms; new tunnel ${cold[name].toFixed(2)} ms, with session resumption ${resumed[name].toFixed(2)} ms; handshake cost per new connection ≈ ${(cold[name] - kept[name]).toFixed(2)} ms full, ${(resumed[name] - kept[name]).toFixed(2)} ms resumed`,
    )
  // One write per new tunnel, one at a time: writes per second are 1 / latency.
  console.log(
    `gated/bare, a new tunnel per write (one at a time, alternating blocks): ${(cold.bare / cold.gated).toFixed(2)} without session resumption, ${(resumed.bare / resumed.gated).toFixed(2)} with`,
  )
  console.log(
    `gated/bare (keep-alive) writes per second: median ${median(ratios).toFixed(2)} (range ${range(ratios)})`,
  )
  console.log(
    `proxy CPU per write, gated/bare: median ${median(cpuRatios).toFixed(2)}x (range ${range(cpuRatios)})`,
  )
  // The ratios depend on how fast the machine runs the bare path; the gate's own cost in µs is
  // the figure to compare across machines.
  console.log(
    `the gate's added CPU per write (gated − bare): median ${median(addedCpu).toFixed(0)} µs (range ${Math.min(...addedCpu).toFixed(0)}–${Math.max(...addedCpu).toFixed(0)})`,
  )
  const drained = await rig.drain()
  console.log(
    drained.left === 0
      ? `drain after resuming the control plane: ${drained.queued} receipts in ${drained.seconds.toFixed(1)} s`
      : `drain: ${drained.left} of ${drained.queued} receipts still queued after ${drained.seconds.toFixed(0)} s`,
  )
  console.log(`target: gated/bare >= 0.8 → ${median(ratios) >= 0.8 ? 'met' : 'NOT met'}`)
  redis.disconnect()
} finally {
  await rig.close()
}
process.exit(0)
