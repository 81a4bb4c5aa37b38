/**
 * Gated MCP tool calls vs a bare pass-through of the same calls (issue 16), as a sidecar sees
 * them (bench/support/sidecar-rig.ts): gate-proxy and the bare http-proxy-3 baseline each get
 * CPU 0 while measured; the SDK's McpServer (Streamable HTTP, answers as SSE), the load
 * (autocannon, `tools/call` with a fresh JSON-RPC id each, every answer checked), Redis and
 * Postgres share CPU 1; the control plane is paused during the rounds and its drain of the
 * proxy's receipts timed afterwards. Alternating bare/gated rounds; the median ratio of calls per
 * second is the figure held to the target, with each proxy's CPU per call beside it (which
 * contention on the other CPU does not move) and the direct figure of this machine.
 * Run: npx tsx bench/mcp.ts [--seconds 4] [--rounds 5] [--connections 32]
 */
import { spawn } from 'node:child_process'
import { join } from 'node:path'
import { measureCpu } from './support/cpu-time.js'
import { startRig } from './support/sidecar-rig.js'

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`)
  return i > 0 ? Number(process.argv[i + 1]) : fallback
}
const SECONDS = arg('seconds', 4)
const ROUNDS = arg('rounds', 5)
const CONNECTIONS = arg('connections', 32)
const root = join(import.meta.dirname, '..')

interface Load {
  rps: number
  p50: number
  p99: number
  errors: number
}

const rig = await startRig()
try {
  const mcp = await rig.start(['bench/support/mcp-upstream.ts'], 1)
  const upstream = `http://127.0.0.1:${mcp.port}`
  await rig.api(
    '/v1/systems',
    {
      systemId: 'sys_github',
      kind: 'mcp',
      upstream,
      credential: { header: 'authorization', prefix: 'Bearer ', fromEnv: 'BENCH_TOKEN' },
      reads: 'pass',
      routes: [],
      tools: [],
      mcp: {
        endpoint: '/mcp',
        filterToolsList: false,
        tools: [{ name: 'create_issue', verb: 'verify', target: '{arguments.repo}' }],
      },
    },
    rig.tenant.apiKey,
  )
  const bare = await rig.start(['bench/support/bare-proxy.ts', upstream, '/sys_github'], 0)
  const gated = await rig.startProxy()
  const urls = {
    direct: `${upstream}/mcp`,
    bare: `http://127.0.0.1:${bare.port}/sys_github/mcp`,
    gated: `http://127.0.0.1:${gated.port}/sys_github/mcp`,
  }
  const HEADERS = {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': '2025-06-18',
  }
  /** An MCP session through `url`: initialize, then the initialized notification. */
  const session = async (url: string): Promise<string> => {
    const init = await fetch(url, {
      method: 'POST',
      headers: HEADERS,
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 0,
        method: 'initialize',
        params: {
          protocolVersion: '2025-06-18',
          capabilities: {},
          clientInfo: { name: 'bench', version: '1' },
        },
      }),
    })
    await init.text()
    const sid = init.headers.get('mcp-session-id')
    if (init.status !== 200 || !sid) throw new Error(`initialize through ${url}: ${init.status}`)
    const note = await fetch(url, {
      method: 'POST',
      headers: { ...HEADERS, 'mcp-session-id': sid },
      body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }),
    })
    await note.text()
    return sid
  }
  const sessions = {
    direct: await session(urls.direct),
    bare: await session(urls.bare),
    gated: await session(urls.gated),
  }
  // The gated path must be ALLOW with a receipt, or the ratio measures refusals.
  const probe = await fetch(urls.gated, {
    method: 'POST',
    headers: { ...HEADERS, 'mcp-session-id': sessions.gated },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/call',
      params: { name: 'create_issue', arguments: { repo: 'acme/probe', title: 't' } },
    }),
  })
  const probeBody = await probe.text()
  if (!probe.headers.get('x-writegate-receipt') || !probeBody.includes('created'))
    throw new Error(`the gated call is not ALLOWed: ${probe.status} ${probeBody}`)

  const load = (path: keyof typeof urls, seconds: number): Promise<Load> =>
    new Promise((resolve, reject) => {
      const child = spawn(
        'taskset',
        [
          '-c',
          '1',
          process.execPath,
          '--import',
          'tsx',
          'bench/support/mcp-load.ts',
          urls[path],
          sessions[path],
          String(seconds),
          String(CONNECTIONS),
        ],
        { cwd: root, stdio: ['ignore', 'pipe', 'inherit'] },
      )
      let out = ''
      child.stdout.on('data', (d) => (out += d))
      child.once('exit', () => {
        try {
          resolve(JSON.parse(out) as Load)
        } catch (err) {
          reject(err)
        }
      })
    })

  rig.pauseControlPlane()
  console.log(
    `MCP tools/call: ${CONNECTIONS} connections, ${ROUNDS} alternating rounds of ${SECONDS} s, node ${process.version}; proxies on CPU 0, load, server, Redis and Postgres on CPU 1, control plane paused`,
  )
  for (const p of ['direct', 'bare', 'gated'] as const) await load(p, 1) // warm up
  const direct = await load('direct', SECONDS)
  const proxyPid = { bare: bare.child.pid, gated: gated.child.pid }
  const rounds: { rps: number; cpu: number }[] = []
  let errors = direct.errors
  for (let i = 0; i < ROUNDS; i++) {
    const got: Record<string, Load & { cpuUs: number }> = {}
    for (const p of ['bare', 'gated'] as const) {
      const stop = measureCpu({ proxy: () => [proxyPid[p] as number] })
      const r = await load(p, SECONDS)
      errors += r.errors
      got[p] = { ...r, cpuUs: ((stop().proxy ?? 0) * 1000) / (r.rps * SECONDS) }
    }
    const b = got.bare as Load & { cpuUs: number }
    const g = got.gated as Load & { cpuUs: number }
    rounds.push({ rps: g.rps / b.rps, cpu: g.cpuUs / b.cpuUs })
    console.log(
      `round ${i + 1}: bare ${b.rps.toFixed(0)}/s (p99 ${b.p99} ms, ${b.cpuUs.toFixed(0)} µs CPU/call)   gated ${g.rps.toFixed(0)}/s (p99 ${g.p99} ms, ${g.cpuUs.toFixed(0)} µs CPU/call)   gated/bare ${(g.rps / b.rps).toFixed(2)}`,
    )
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number
  const range = (xs: number[]) => `${Math.min(...xs).toFixed(2)}–${Math.max(...xs).toFixed(2)}`
  const rps = rounds.map((r) => r.rps)
  const cpu = rounds.map((r) => r.cpu)
  console.log(
    `direct (load straight to the server, this machine): ${direct.rps.toFixed(0)}/s, p99 ${direct.p99} ms`,
  )
  console.log(`gated/bare calls per second: median ${median(rps).toFixed(2)} (range ${range(rps)})`)
  console.log(`proxy CPU per call, gated/bare: median ${median(cpu).toFixed(2)}x (range ${range(cpu)})`)
  console.log(`answers that were not tool results (all paths): ${errors}`)
  const drained = await rig.drain()
  console.log(
    drained.left === 0
      ? `drain after resuming the control plane: ${drained.queued} receipts in ${drained.seconds.toFixed(1)} s`
      : `drain: ${drained.left} of ${drained.queued} receipts still queued after ${drained.seconds.toFixed(0)} s`,
  )
  console.log(`target: gated/bare >= 0.8 → ${median(rps) >= 0.8 && errors === 0 ? 'met' : 'NOT met'}`)
} finally {
  await rig.close()
}
process.exit(0)
