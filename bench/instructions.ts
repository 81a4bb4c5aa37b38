/**
 * Instructions per forwarded write, gate-proxy against its bare baseline, counted by
 * `valgrind --tool=callgrind`: unlike CPU time, a count does not move with the host's speed or
 * with what else runs on it, so changes smaller than the machines' noise (±15% between identical
 * runs) can be measured. Each proxy runs under callgrind; after a warm-up its counters are
 * zeroed (`callgrind_control -z`), `--requests` ALLOWed writes are sent over `--connections`
 * keep-alive connections, and the counters are dumped (`callgrind_control -d`).
 *
 *   --tls: HTTPS writes through CONNECT tunnels (gate-proxy intercepting, against
 *          bench/support/bare-tls-proxy.ts), as bench:tls; else plain HTTP, as bench:proxy.
 *
 * To compare two versions of the code, run it on each checkout (a git worktree) on the same
 * machine; the count of one version repeats within about 1% between runs.
 * Run: npx tsx bench/instructions.ts [--tls] [--requests 3000] [--warmup 1500] [--connections 8]
 * Needs valgrind, PostgreSQL at 127.0.0.1:5432 and Redis at 127.0.0.1:6379.
 */
import { execFileSync } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Agent, ProxyAgent, request } from 'undici'
import { createInterceptionCa } from '../src/tls/interception-ca.js'
import { startRig } from './support/sidecar-rig.js'

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`)
  return i > 0 ? Number(process.argv[i + 1]) : fallback
}
const TLS = process.argv.includes('--tls')
const REQUESTS = arg('requests', 3000)
const WARMUP = arg('warmup', 1500)
const CONNECTIONS = arg('connections', 8)

const dir = mkdtempSync(join(tmpdir(), 'wg-bench-instructions-'))
/** callgrind, with what V8's generated code needs (code written at run time is re-read). */
const callgrind = (name: string) => [
  'valgrind',
  '--tool=callgrind',
  '--smc-check=all-non-file',
  `--callgrind-out-file=${join(dir, `${name}.%p.out`)}`,
]

/** The `summary:` (total instructions) of the last dump callgrind wrote for `name`. */
function lastTotal(name: string): number {
  const dumps = readdirSync(dir)
    .filter((f) => f.startsWith(`${name}.`) && /\.out\.\d+$/.test(f))
    .sort((a, b) => Number(a.split('.').pop()) - Number(b.split('.').pop()))
  const text = readFileSync(join(dir, dumps.at(-1) as string), 'utf8')
  const m = /^(?:summary|totals): (\d+)/m.exec(text)
  if (!m) throw new Error(`no total in ${dumps.at(-1)}`)
  return Number(m[1])
}

/** Has callgrind (which answers even while the program sits idle in epoll_wait) zero or dump its counters. */
function control(flag: '-z' | '-d', pid: number): void {
  execFileSync('callgrind_control', [flag, String(pid)], { stdio: 'ignore', timeout: 120_000 })
}

const made = await createInterceptionCa({ hosts: ['localhost'], days: 1 })
writeFileSync(join(dir, 'ca.crt'), made.certPem)
writeFileSync(join(dir, 'ca.key'), made.keyPem, { mode: 0o600 })

const rig = await startRig({ isolate: false })
try {
  const upstreamCaFile = join(dir, 'upstream-ca.crt')
  const upstream = TLS
    ? await rig.start(['bench/support/https-upstream.ts', upstreamCaFile], 1)
    : await rig.start(['bench/support/upstream.ts'], 1)
  const origin = TLS ? `https://localhost:${upstream.port}` : `http://127.0.0.1:${upstream.port}`
  await rig.api(
    '/v1/systems',
    {
      systemId: 'sys_billing',
      kind: 'http',
      upstream: origin,
      ...(TLS ? { caBundle: readFileSync(upstreamCaFile, 'utf8') } : {}),
      credential: { header: 'authorization', prefix: 'Bearer ', fromEnv: 'BENCH_TOKEN' },
      reads: 'pass',
      routes: [{ method: 'POST', path: '/v1/checks', verb: 'verify' }],
      tools: [],
    },
    rig.tenant.apiKey,
  )
  const bare = TLS
    ? await rig.start(
        ['bench/support/bare-tls-proxy.ts', origin, upstreamCaFile, join(dir, 'ca.crt'), join(dir, 'ca.key')],
        0,
        {},
        callgrind('bare'),
      )
    : await rig.start(['bench/support/bare-proxy.ts', origin], 0, {}, callgrind('bare'))
  const gated = await rig.startProxy(
    TLS ? { proxy: { tls: { caCertFile: join(dir, 'ca.crt'), caKeyFile: join(dir, 'ca.key') } } } : {},
    {},
    callgrind('gated'),
  )

  /** A dispatcher and URL that send one ALLOWed write through the proxy at `port`. */
  function client(port: number, name: 'bare' | 'gated') {
    if (TLS)
      return {
        url: `https://localhost:${upstream.port}/v1/checks`,
        dispatcher: new ProxyAgent({
          uri: `http://127.0.0.1:${port}`,
          requestTls: { ca: made.certPem },
          connections: CONNECTIONS,
        }),
      }
    const path = name === 'gated' ? '/sys_billing/v1/checks' : '/v1/checks'
    return { url: `http://127.0.0.1:${port}${path}`, dispatcher: new Agent({ connections: CONNECTIONS }) }
  }

  async function count(name: 'bare' | 'gated', port: number, pid: number): Promise<number> {
    const { url, dispatcher } = client(port, name)
    const one = async () => {
      const r = await request(url, {
        method: 'POST',
        body: '{"amount":5}',
        headers: { 'content-type': 'application/json' },
        dispatcher,
      })
      await r.body.text()
      if (r.statusCode !== 200) throw new Error(`${name}: status ${r.statusCode}`)
    }
    const many = async (n: number) => {
      let left = n
      await Promise.all(
        Array.from({ length: CONNECTIONS }, async () => {
          while (left-- > 0) await one()
        }),
      )
    }
    await many(WARMUP)
    control('-z', pid)
    await many(REQUESTS)
    control('-d', pid)
    await dispatcher.close()
    return lastTotal(name) / REQUESTS
  }

  console.log(
    `instructions per ${TLS ? 'HTTPS' : 'HTTP'} write under callgrind, ${REQUESTS} writes over ${CONNECTIONS} connections after ${WARMUP} to warm up, node ${process.version}`,
  )
  const b = await count('bare', bare.port, bare.child.pid as number)
  const g = await count('gated', gated.port, gated.child.pid as number)
  console.log(`bare:  ${(b / 1000).toFixed(1)}k instructions per write`)
  console.log(`gated: ${(g / 1000).toFixed(1)}k instructions per write`)
  console.log(`gated/bare: ${(g / b).toFixed(3)}`)
} finally {
  await rig.close()
}
process.exit(0)
