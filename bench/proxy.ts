/**
 * gate-proxy overhead on loopback (issue 5). In one run, at a fixed 1,000 requests per
 * second and at saturation, it measures:
 *   1. direct to the upstream;
 *   2. a bare http-proxy-3 pass-through (the baseline);
 *   3. gate-proxy on the ALLOW path, with the control plane on real Postgres and real Redis.
 * Every server is its own process; autocannon runs as a separate process too. Figures are
 * reported as ratios against the baseline measured in the same run.
 *
 * writegate runs from `dist/` (built first), as the container image runs it.
 * Run: npx tsx bench/proxy.ts [--duration 10] [--connections 64] [--reps 5] [--isolate]
 *
 * --isolate measures the proxy as a sidecar sees it: each proxy (bare or gated) gets CPU 0 to
 * itself and everything else (autocannon, the upstream, Redis, Postgres) shares CPU 1; the
 * control plane, which runs on other hosts in a deployment, is paused (SIGSTOP) during the
 * timed runs, so proxy receipts wait durably in Redis. It is resumed afterwards, on CPU 0 (the
 * proxies idle), and the time it takes to drain them into the audit log is reported. Needs
 * taskset (util-linux).
 * Needs PostgreSQL at 127.0.0.1:5432 (trust, database test) and Redis at 127.0.0.1:6379.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { join } from 'node:path'
import { cpuSplitMs, measureCpu, pidsOf, rssMb } from './support/cpu-time.js'
import { type Rig, startRig } from './support/sidecar-rig.js'

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`)
  return i > 0 ? Number(process.argv[i + 1]) : fallback
}
const DURATION = arg('duration', 10)
const CONNECTIONS = arg('connections', 64)
/** Alternating bare/gated saturation pairs for the throughput and CPU ratios, which noise on a shared host needs. */
const REPS = arg('reps', 5)
const ISOLATE = process.argv.includes('--isolate')
const root = join(import.meta.dirname, '..')

interface Result {
  rps: number
  p50: number
  p99: number
  p999: number
  errors: number
  non2xx: number
}

/** The drain's CPU per receipt, by process group (Postgres's backends include its WAL writer and checkpointer). */
function perReceipt(d: { queued: number; cpuMs: Record<string, number> }): string {
  const us = (k: string) => Math.round(((d.cpuMs[k] ?? 0) * 1000) / d.queued)
  return `control plane ${us('controlPlane')}, Postgres ${us('postgres')}, Redis ${us('redis')} (machine ${us('machine')})`
}

function load(rig: Rig, url: string, rate: number | null, seconds = DURATION): Promise<Result> {
  const args = [
    join(root, 'node_modules', 'autocannon', 'autocannon.js'),
    '-j',
    '-d',
    String(seconds),
    '-c',
    String(rate ? 32 : CONNECTIONS),
    '-m',
    'POST',
    '-H',
    'content-type=application/json',
    '-b',
    '{"amount":1}',
  ]
  if (rate) args.push('-R', String(rate))
  args.push(url)
  return new Promise((resolve, reject) => {
    const child = spawn(...rig.onCpu(1, args), { stdio: ['ignore', 'pipe', 'ignore'] })
    let out = ''
    child.stdout.on('data', (d) => (out += d))
    child.once('exit', () => {
      try {
        const j = JSON.parse(out)
        resolve({
          rps: j.requests.average,
          p50: j.latency.p50,
          p99: j.latency.p99,
          p999: j.latency.p99_9 ?? j.latency.p999,
          errors: j.errors + j.timeouts,
          non2xx: j.non2xx,
        })
      } catch (err) {
        reject(err)
      }
    })
  })
}

/** One request at a time over one keep-alive connection: the per-request cost without queueing. */
async function sequential(url: string, n = 3000): Promise<{ p50: number; p90: number; p99: number }> {
  const { Agent, request } = await import('node:http')
  const agent = new Agent({ keepAlive: true, maxSockets: 1 })
  const u = new URL(url)
  const once = () =>
    new Promise<number>((resolve, reject) => {
      const t0 = performance.now()
      const req = request(
        {
          host: u.hostname,
          port: u.port,
          path: u.pathname,
          method: 'POST',
          agent,
          headers: { 'content-type': 'application/json' },
        },
        (res) => {
          res.resume()
          res.on('end', () => resolve(performance.now() - t0))
        },
      )
      req.on('error', reject)
      req.end('{"amount":1}')
    })
  for (let i = 0; i < 300; i++) await once()
  const xs: number[] = []
  for (let i = 0; i < n; i++) xs.push(await once())
  agent.destroy()
  xs.sort((a, b) => a - b)
  const at = (q: number) => Number((xs[Math.floor(q * xs.length)] as number).toFixed(3))
  return { p50: at(0.5), p90: at(0.9), p99: at(0.99) }
}

async function main() {
  const rig = await startRig({ isolate: ISOLATE })
  try {
    const upstream = await rig.start(['bench/support/upstream.ts'], 1)
    const upstreamOrigin = `http://127.0.0.1:${upstream.port}`
    const bare = await rig.start(['bench/support/bare-proxy.ts', upstreamOrigin], 0)
    await rig.api('/v1/policy', { refund: 'allow' }, rig.tenant.apiKey, 'PUT')
    await rig.api(
      '/v1/systems',
      {
        systemId: 'sys_billing',
        kind: 'http',
        upstream: upstreamOrigin,
        credential: { header: 'authorization', prefix: 'Bearer ', fromEnv: 'BENCH_TOKEN' },
        reads: 'pass',
        routes: [{ method: 'POST', path: '/v1/refunds', verb: 'refund' }],
        tools: [],
      },
      rig.tenant.apiKey,
    )
    // WG_BENCH_PROXY_NODE_OPTIONS: V8 flags for the gated proxy alone (a footprint experiment).
    const proxyEnv: Record<string, string> = process.env.WG_BENCH_PROXY_NODE_OPTIONS
      ? { NODE_OPTIONS: process.env.WG_BENCH_PROXY_NODE_OPTIONS }
      : {}
    const gatedProxy = await rig.startProxy({}, proxyEnv)
    const gated = gatedProxy.child
    const cp = rig.controlPlane

    const targets = {
      direct: `${upstreamOrigin}/v1/refunds`,
      bare: `http://127.0.0.1:${bare.port}/sys_billing/v1/refunds`,
      gated: `http://127.0.0.1:${gatedProxy.port}/sys_billing/v1/refunds`,
    }
    const check = await fetch(targets.gated, { method: 'POST', body: '{}' })
    if (check.status !== 200 || !check.headers.get('x-writegate-receipt'))
      throw new Error(`gated path is not ALLOW: ${check.status}`)
    if (ISOLATE) rig.pauseControlPlane()

    console.log(
      `gate-proxy benchmark: loopback, ${DURATION}s per run, node ${process.version}, autocannon in its own process${ISOLATE ? '; isolated: proxies on CPU 0, the rest on CPU 1, control plane paused' : ''}`,
    )
    const rows: Record<
      string,
      {
        fixed: Result
        sat: Result
        seq: { p50: number; p90: number; p99: number }
        cpu: Record<string, number>
        /** Of the proxy's CPU in the saturation run, the kernel's on its behalf (ms). */
        proxySystem: number
        /** The proxy's CPU seconds per second at 1,000/s, and its memory idle and after that run. */
        vcpu: number
        rssIdle: number
        rssLoaded: { now: number; peak: number }
      }
    > = {}
    const pid = (c: ChildProcess) => () => (c.pid ? [c.pid] : [])
    // Whose CPU each path spends, so its cost can be told apart from the contention around it.
    const cpuGroups: Record<string, Record<string, () => number[]>> = {
      direct: { upstream: pid(upstream.child) },
      bare: { proxy: pid(bare.child), upstream: pid(upstream.child) },
      gated: {
        proxy: pid(gated),
        upstream: pid(upstream.child),
        redis: () => pidsOf('redis-server'),
        'control plane': pid(cp),
        postgres: () => pidsOf('postgres'),
      },
    }
    const proxyPid: Record<string, number | undefined> = { bare: bare.child.pid, gated: gated.pid }
    for (const [name, url] of Object.entries(targets)) {
      // Idle: started and ready, nothing sent yet (a sidecar's memory before its agent writes).
      const rssIdle = rssMb(proxyPid[name]).now
      await load(rig, url, null) // warm-up
      const seq = await sequential(url)
      const atRate = measureCpu({ proxy: cpuGroups[name]?.proxy ?? (() => []) })
      const fixed = await load(rig, url, 1000)
      const vcpu = (atRate().proxy ?? 0) / (DURATION * 1000)
      const rssLoaded = rssMb(proxyPid[name])
      const stop = measureCpu(cpuGroups[name] ?? {})
      const pid = proxyPid[name]
      const systemBefore = pid ? cpuSplitMs(pid).system : 0
      const sat = await load(rig, url, null)
      const proxySystem = pid ? cpuSplitMs(pid).system - systemBefore : 0
      rows[name] = { fixed, sat, seq, cpu: stop(), proxySystem, vcpu, rssIdle, rssLoaded }
    }
    const fmt = (r: Result) =>
      `${String(Math.round(r.rps)).padStart(6)} req/s  p50 ${String(r.p50).padStart(4)} ms  p99 ${String(r.p99).padStart(4)} ms  p99.9 ${String(r.p999).padStart(4)} ms  errors ${r.errors + r.non2xx}`
    for (const [name, r] of Object.entries(rows)) {
      console.log(
        `${name.padEnd(7)} one at a time: p50 ${r.seq.p50} ms  p90 ${r.seq.p90} ms  p99 ${r.seq.p99} ms`,
      )
      console.log(`${name.padEnd(7)} @1000/s: ${fmt(r.fixed)}`)
      console.log(`${name.padEnd(7)} saturate: ${fmt(r.sat)}`)
      const requests = r.sat.rps * DURATION
      const perReq = Object.entries(r.cpu)
        .map(
          ([who, ms]) =>
            `${who} ${((ms * 1000) / requests).toFixed(0)}${who === 'proxy' ? ` (${((r.proxySystem * 1000) / requests).toFixed(0)} of it system)` : ''}`,
        )
        .join(', ')
      console.log(`${name.padEnd(7)} saturate: CPU µs per request: ${perReq}`)
    }
    // Saturation again, in alternating short runs of bare and gated: the host's speed drifts
    // over a run (other tenants, frequency), so each pair is measured close together and the
    // median of the pairs' ratios taken. This is the throughput figure the target is held to.
    const pairs: { rps: number; cpu: number; addedUs: number }[] = []
    const short = Math.max(2, Math.round(DURATION / 2))
    for (let rep = 0; rep < REPS; rep++) {
      const got: Record<string, { rps: number; cpuPerReq: number }> = {}
      for (const name of ['bare', 'gated'] as const) {
        const stop = measureCpu({ proxy: cpuGroups[name]?.proxy ?? (() => []) })
        const r = await load(rig, targets[name], null, short)
        got[name] = { rps: r.rps, cpuPerReq: ((stop().proxy ?? 0) * 1000) / (r.rps * short) }
      }
      const bare = got.bare as { rps: number; cpuPerReq: number }
      const gatedRun = got.gated as { rps: number; cpuPerReq: number }
      pairs.push({
        rps: gatedRun.rps / bare.rps,
        cpu: gatedRun.cpuPerReq / bare.cpuPerReq,
        addedUs: gatedRun.cpuPerReq - bare.cpuPerReq,
      })
    }
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number
    const range = (xs: number[]) => `${Math.min(...xs).toFixed(2)}–${Math.max(...xs).toFixed(2)}`
    const rpsRatios = pairs.map((p) => p.rps)
    const cpuRatios = pairs.map((p) => p.cpu)
    const b = rows.bare as (typeof rows)[string]
    const g = rows.gated as (typeof rows)[string]
    console.log(
      `added per-request latency, one at a time: p50 +${(g.seq.p50 - b.seq.p50).toFixed(3)} ms, p99 +${(g.seq.p99 - b.seq.p99).toFixed(3)} ms`,
    )
    console.log(
      `gated/bare saturation throughput, ${REPS} alternating ${short}s pairs: median ${median(rpsRatios).toFixed(2)}x (range ${range(rpsRatios)}; target >= 0.9 (issue 19): ${median(rpsRatios) >= 0.9 ? 'met' : 'NOT met'}); the single ${DURATION}s runs above: ${(g.sat.rps / b.sat.rps).toFixed(2)}x`,
    )
    console.log(
      `proxy process CPU per request at saturation, gated/bare, same pairs: median ${median(cpuRatios).toFixed(2)}x (range ${range(cpuRatios)}; target <= 1.1 (issue 19): ${median(cpuRatios) <= 1.1 ? 'met' : 'NOT met'})`,
    )
    // The ratios depend on how fast the machine runs the bare path; the gate's own cost in µs is
    // the figure to compare across machines.
    const added = pairs.map((p) => p.addedUs)
    console.log(
      `the gate's added proxy CPU per request (gated − bare), same pairs: median ${median(added).toFixed(0)} µs (range ${Math.min(...added).toFixed(0)}–${Math.max(...added).toFixed(0)})`,
    )
    console.log(
      `added p99 at 1000/s over bare: ${g.fixed.p99 - b.fixed.p99} ms (target <= 1 ms: ${g.fixed.p99 - b.fixed.p99 <= 1 ? 'met' : 'NOT met'})`,
    )
    const mb = (x: number) => `${x.toFixed(0)} MB`
    console.log(
      `proxy footprint at 1000/s after the saturation warm-up: gated ${g.vcpu.toFixed(2)} vCPU, RSS ${mb(g.rssIdle)} idle, ${mb(g.rssLoaded.now)} after (peak ${mb(g.rssLoaded.peak)}); bare ${b.vcpu.toFixed(2)} vCPU, ${mb(b.rssIdle)} idle, ${mb(b.rssLoaded.now)} after (target: gated <= 0.20 vCPU and <= 60 MB, an Istio 1.24 sidecar: ${g.vcpu <= 0.2 && g.rssLoaded.peak <= 60 ? 'met' : 'NOT met'})`,
    )
    // A sidecar's steady state: a fresh proxy of each kind driven only at 1,000/s, one run to
    // warm it and one measured. The footprint above is measured after a saturation warm-up,
    // whose allocation rate grows V8's heaps past what 1,000/s needs; Istio's figure is for a
    // sidecar serving 1,000/s.
    const steady: Record<string, { vcpu: number; idle: number; rss: { now: number; peak: number } }> = {}
    for (const name of ['bare', 'gated'] as const) {
      const fresh =
        name === 'bare'
          ? await rig.start(['bench/support/bare-proxy.ts', upstreamOrigin], 0)
          : await rig.startProxy({}, proxyEnv)
      const url = `http://127.0.0.1:${fresh.port}/sys_billing/v1/refunds`
      const pid = fresh.child.pid
      const idle = rssMb(pid).now
      await load(rig, url, 1000)
      const atRate = measureCpu({ proxy: () => (pid ? [pid] : []) })
      await load(rig, url, 1000)
      steady[name] = { vcpu: (atRate().proxy ?? 0) / (DURATION * 1000), idle, rss: rssMb(pid) }
      fresh.child.kill()
    }
    const sb = steady.bare as (typeof steady)[string]
    const sg = steady.gated as (typeof steady)[string]
    console.log(
      `proxy footprint at 1000/s, a fresh proxy never saturated (a sidecar's steady state): gated ${sg.vcpu.toFixed(2)} vCPU, RSS ${mb(sg.idle)} idle, ${mb(sg.rss.now)} after 2×${DURATION}s (peak ${mb(sg.rss.peak)}); bare ${sb.vcpu.toFixed(2)} vCPU, ${mb(sb.idle)} idle, ${mb(sb.rss.now)} after (target: gated <= 0.20 vCPU and <= 60 MB: ${sg.vcpu <= 0.2 && sg.rss.peak <= 60 ? 'met' : 'NOT met'})`,
    )
    if (ISOLATE) {
      // The receipts the paused control plane left in Redis: every one must reach the audit log.
      const d = await rig.drain()
      console.log(
        d.left === 0
          ? `drain after resuming the control plane (on CPU 0; Postgres and Redis on CPU 1): ${d.queued} queued receipts into the audit log in ${d.seconds.toFixed(1)} s (${Math.round(d.queued / d.seconds)} receipts/s; target >= 20,000/s (issue 19): ${d.queued / d.seconds >= 20_000 ? 'met' : 'NOT met'}); CPU µs per receipt: ${perReceipt(d)}`
          : `drain after resuming the control plane: ${d.left} of ${d.queued} receipts still queued after ${d.seconds.toFixed(0)} s`,
      )
    }
  } finally {
    await rig.close()
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err)
    process.exit(1)
  },
)
