/**
 * `POST /v1/check` (a decision with its durable, hash-chained receipt in Postgres) against
 * Cerbos 0.55's `POST /api/check/resources` (a decision, logged to a file), on this machine, in
 * alternating rounds driven by wrk (Debian's) at the same concurrency.
 *
 *   npm run bench:cerbos            (-- --duration 10 --rounds 3 --connections 32)
 *
 * Cerbos is installed at run time into a scratch directory from the npm registry
 * (`@cerbos/cerbos-linux-x64`, never a dependency of writegate), with a disk policy that allows
 * what a tenant's default `verify: allow` allows. writegate runs as it ships (dist/), on real
 * Postgres and Redis (the sidecar rig), its quota raised by settings. Each /v1/check answers
 * only after its receipt is committed to the audit log, so every writegate decision counted
 * here has a durable receipt; Cerbos's decision log is a file it appends to.
 * Needs wrk, PostgreSQL at 127.0.0.1:5432 and Redis at 127.0.0.1:6379.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import { cpuMs, pidsOf } from './support/cpu-time.js'
import { startRig, waitHttp } from './support/sidecar-rig.js'

const CERBOS_VERSION = '0.55.0'

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`)
  return i >= 0 ? Number(process.argv[i + 1]) : fallback
}
const DURATION = arg('duration', 10)
const ROUNDS = arg('rounds', 3)
const CONNECTIONS = arg('connections', 32)

interface WrkResult {
  rps: number
  requests: number
  failed: number
  p99ms: number
}

/** wrk at saturation with `connections`, POSTing `body`; its report read back. */
function wrk(
  url: string,
  body: string,
  headers: Record<string, string>,
  dir: string,
  seconds: number,
): WrkResult {
  const script = join(dir, 'post.lua')
  writeFileSync(
    script,
    [
      'wrk.method = "POST"',
      `wrk.body = ${JSON.stringify(body)}`,
      ...Object.entries(headers).map(([k, v]) => `wrk.headers[${JSON.stringify(k)}] = ${JSON.stringify(v)}`),
      '',
    ].join('\n'),
  )
  const out = execFileSync(
    'wrk',
    ['-t2', `-c${CONNECTIONS}`, `-d${seconds}s`, '--latency', '-s', script, url],
    { encoding: 'utf8' },
  )
  const num = (re: RegExp) => Number(re.exec(out)?.[1] ?? 0)
  const p99 = /99%\s+([\d.]+)(us|ms|s)/.exec(out)
  const p99ms = p99 ? Number(p99[1]) * ({ us: 0.001, ms: 1, s: 1000 }[p99[2] as 'us' | 'ms' | 's'] ?? 1) : 0
  return {
    rps: num(/Requests\/sec:\s+([\d.]+)/),
    requests: num(/(\d+) requests in/),
    failed: num(/Non-2xx or 3xx responses: (\d+)/) + num(/Socket errors: connect (\d+)/),
    p99ms,
  }
}

/** Cerbos from the npm registry into `dir`, with a policy equivalent to `verify: allow`. */
async function startCerbos(dir: string): Promise<{ url: string; child: ChildProcess }> {
  execFileSync(
    'npm',
    [
      'install',
      '--prefix',
      dir,
      '--no-save',
      '--no-audit',
      '--no-fund',
      `@cerbos/cerbos-linux-x64@${CERBOS_VERSION}`,
    ],
    { stdio: 'ignore' },
  )
  const bin = join(dir, 'node_modules', '@cerbos', 'cerbos-linux-x64', 'cerbos-linux-x64')
  mkdirSync(join(dir, 'policies'))
  writeFileSync(
    join(dir, 'policies', 'check.yaml'),
    [
      'apiVersion: api.cerbos.dev/v1',
      'resourcePolicy:',
      '  version: default',
      '  resource: check',
      '  rules:',
      '    - actions: ["verify"]',
      '      effect: EFFECT_ALLOW',
      '      roles: ["*"]',
      '',
    ].join('\n'),
  )
  const port = 19000 + Math.floor(Math.random() * 500)
  writeFileSync(
    join(dir, 'conf.yaml'),
    [
      'server:',
      `  httpListenAddr: "127.0.0.1:${port}"`,
      `  grpcListenAddr: "127.0.0.1:${port + 1}"`,
      'storage:',
      '  driver: disk',
      '  disk:',
      `    directory: ${join(dir, 'policies')}`,
      '    watchForChanges: false',
      'audit:',
      '  enabled: true',
      '  accessLogsEnabled: false',
      '  decisionLogsEnabled: true',
      '  backend: file',
      '  file:',
      `    path: ${join(dir, 'decisions.log')}`,
      '',
    ].join('\n'),
  )
  // Its log is left out: wrk ends each run with requests in flight, which Cerbos logs as errors.
  const child = spawn(bin, ['server', `--config=${join(dir, 'conf.yaml')}`, '--log-level=error'], {
    stdio: 'ignore',
  })
  const url = `http://127.0.0.1:${port}`
  await waitHttp(`${url}/_cerbos/health`)
  return { url, child }
}

const dir = mkdtempSync(join(tmpdir(), 'wg-cerbos-'))
const rig = await startRig({ isolate: false })
let cerbos: ChildProcess | undefined
try {
  const started = await startCerbos(dir)
  cerbos = started.child
  const cerbosCall = {
    url: `${started.url}/api/check/resources`,
    body: JSON.stringify({
      requestId: 'bench',
      principal: { id: 'agent', roles: ['agent'] },
      resources: [{ actions: ['verify'], resource: { kind: 'check', id: 'c1' } }],
    }),
    headers: { 'content-type': 'application/json' },
  }
  const checkCall = {
    url: `${rig.origin}/v1/check`,
    body: JSON.stringify({ verb: 'verify' }),
    headers: { 'content-type': 'application/json', authorization: `Bearer ${rig.agentKey}` },
  }
  // Both answer as they should before anything is timed.
  const probe = await fetch(checkCall.url, {
    method: 'POST',
    body: checkCall.body,
    headers: checkCall.headers,
  })
  const probeBody = (await probe.json()) as { decision?: string; receiptId?: string }
  if (probe.status !== 200 || probeBody.decision !== 'ALLOW' || !probeBody.receiptId)
    throw new Error(`/v1/check does not ALLOW: ${probe.status} ${JSON.stringify(probeBody)}`)
  const cerbosProbe = (await (
    await fetch(cerbosCall.url, { method: 'POST', body: cerbosCall.body, headers: cerbosCall.headers })
  ).json()) as { results?: { actions?: Record<string, string> }[] }
  if (cerbosProbe.results?.[0]?.actions?.verify !== 'EFFECT_ALLOW')
    throw new Error(`Cerbos does not allow: ${JSON.stringify(cerbosProbe)}`)

  console.log(
    `/v1/check vs Cerbos ${CERBOS_VERSION}: wrk, ${CONNECTIONS} connections, ${DURATION}s per run, ${ROUNDS} alternating rounds, node ${process.version}, every process on the same ${
      (await import('node:os')).cpus().length
    } cores`,
  )
  wrk(checkCall.url, checkCall.body, checkCall.headers, dir, 3) // warm-up
  wrk(cerbosCall.url, cerbosCall.body, cerbosCall.headers, dir, 3)
  // CPU per decision of each server process: what each side costs apart from the contention.
  const groups = {
    'control plane': () => [rig.controlPlane.pid as number],
    postgres: () => pidsOf('postgres'),
    redis: () => pidsOf('redis-server'),
    cerbos: () => [cerbos?.pid as number],
  }
  const cpuNow = () =>
    Object.fromEntries(
      Object.entries(groups).map(([name, pids]) => [name, pids().reduce((n, p) => n + cpuMs(p), 0)]),
    )
  const perDecision = (before: Record<string, number>, requests: number, names: string[]) =>
    names
      .map(
        (n) => `${n} ${((((cpuNow()[n] as number) - (before[n] as number)) * 1000) / requests).toFixed(0)}`,
      )
      .join(', ')
  const ratios: number[] = []
  let answered = 0
  for (let round = 1; round <= ROUNDS; round++) {
    const wBefore = cpuNow()
    const w = wrk(checkCall.url, checkCall.body, checkCall.headers, dir, DURATION)
    const wCpu = perDecision(wBefore, w.requests, ['control plane', 'postgres', 'redis'])
    const cBefore = cpuNow()
    const c = wrk(cerbosCall.url, cerbosCall.body, cerbosCall.headers, dir, DURATION)
    const cCpu = perDecision(cBefore, c.requests, ['cerbos'])
    if (w.failed > 0 || c.failed > 0)
      throw new Error(`round ${round}: failed requests (writegate ${w.failed}, Cerbos ${c.failed})`)
    ratios.push(w.rps / c.rps)
    answered += w.requests
    console.log(
      `round ${round}: writegate ${Math.round(w.rps)}/s (p99 ${w.p99ms.toFixed(1)} ms), Cerbos ${Math.round(c.rps)}/s (p99 ${c.p99ms.toFixed(1)} ms), ratio ${(w.rps / c.rps).toFixed(2)}`,
    )
    console.log(`  CPU µs per decision: writegate: ${wCpu}; Cerbos: ${cCpu}`)
  }
  // Every answered check had its receipt committed before its answer: count them in the log.
  const db = postgres(rig.databaseUrl, { max: 1, onnotice: () => {} })
  const [row] = await db<{ n: number }[]>`select count(*)::int as n from receipts where kind = 'CHECK'`
  await db.end()
  const stored = row?.n ?? 0
  if (stored < answered)
    throw new Error(`${answered} checks answered but only ${stored} CHECK receipts in the audit log`)
  console.log(
    `audit log: ${stored} CHECK receipts for the ${answered} checks wrk counted in the timed rounds (plus warm-up)`,
  )
  const median = [...ratios].sort((a, b) => a - b)[Math.floor(ratios.length / 2)] as number
  console.log(
    `/v1/check ÷ Cerbos, median of ${ROUNDS} rounds: ${median.toFixed(2)}x (range ${Math.min(...ratios).toFixed(2)}–${Math.max(...ratios).toFixed(2)}); target >= 1.0: ${median >= 1 ? 'met' : 'NOT met'}`,
  )
} finally {
  cerbos?.kill('SIGKILL')
  await rig.close()
  rmSync(dir, { recursive: true, force: true })
}
