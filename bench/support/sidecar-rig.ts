/**
 * gate-proxy as a sidecar sees it, for the benchmarks that compare it with a bare proxy: every
 * server is its own process running the built `dist/` (as the image does). Isolated (the
 * default; bench:proxy's `--isolate`), the proxies get
 * CPU 0 to themselves and everything else (load, upstream, Redis, Postgres, this process) shares
 * CPU 1; the control plane, which runs on other hosts in a deployment, is paused (SIGSTOP) while
 * the timed rounds run, so proxy receipts wait durably in Redis, and afterwards (the control
 * plane moved to CPU 0) the time it takes to drain them into the audit log is measured. Needs taskset (util-linux), PostgreSQL at
 * 127.0.0.1:5432 (trust, database test) and Redis at 127.0.0.1:6379.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import { generateKeyPairSync, randomBytes } from 'node:crypto'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import { stringify } from 'yaml'
import { measureCpu, pidsOf } from './cpu-time.js'

const PG = process.env.WRITEGATE_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
const REDIS = process.env.WRITEGATE_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379'
const root = join(import.meta.dirname, '..', '..')
/** writegate runs as it ships: compiled by `npm run build`, not through tsx's loader. */
const MAIN = join(root, 'dist', 'cli', 'main.js')

export interface Rig {
  /** The command line that runs `args` under node, pinned to `cpu` when isolated. */
  onCpu(cpu: 0 | 1, args: string[]): [string, string[]]
  /** Starts `node <args>` (a bench/support script, compiled) pinned to `cpu`; resolves with the port it prints as JSON. */
  start(
    args: string[],
    cpu: 0 | 1,
    env?: Record<string, string>,
  ): Promise<{ port: number; child: ChildProcess }>
  /** The control plane's API, as an admin would call it. */
  api(path: string, body: unknown, bearer?: string, method?: string): Promise<Record<string, unknown>>
  tenant: { apiKey: string; tenantId: string }
  agentKey: string
  /** The control plane's base URL. */
  origin: string
  /** The scratch database the control plane writes its audit log to. */
  databaseUrl: string
  /** Starts a gate-proxy on CPU 0 acting as the agent key, extra settings merged into its config. */
  startProxy(
    settings?: Record<string, unknown>,
    env?: Record<string, string>,
  ): Promise<{ port: number; child: ChildProcess }>
  controlPlane: ChildProcess
  /** Pauses the control plane for the timed rounds. */
  pauseControlPlane(): void
  /** Resumes it and waits for every queued proxy receipt to reach the audit log. */
  drain(): Promise<{
    queued: number
    seconds: number
    left: number
    /** CPU ms the drain took: the control plane, Postgres and Redis. */
    cpuMs: Record<string, number>
  }>
  /** Stops every process, drops the database and the Redis keys, unpins the servers. */
  close(): Promise<void>
}

/** Redis and Postgres (already running) share CPU 1 with the load; put back by `close`. */
function pinServers(cpus: string): void {
  for (const pid of [...pidsOf('redis-server'), ...pidsOf('postgres'), process.pid])
    execFileSync('taskset', ['-a', '-pc', cpus, String(pid)], { stdio: 'ignore' })
}

/** Resolves once `url` answers 2xx (a server started by a bench is up). */
export async function waitHttp(url: string): Promise<void> {
  for (let i = 0; i < 300; i++) {
    try {
      if ((await fetch(url)).ok) return
    } catch {}
    await new Promise((r) => setTimeout(r, 100))
  }
  throw new Error(`not ready: ${url}`)
}

async function withRedis<T>(fn: (r: import('ioredis').Redis) => Promise<T>): Promise<T> {
  const { Redis } = await import('ioredis')
  const r = new Redis(REDIS, { lazyConnect: true })
  try {
    await r.connect()
    return await fn(r)
  } finally {
    r.disconnect()
  }
}

/** Builds `dist/`, creates a scratch database, starts the control plane and one tenant. */
export async function startRig(
  opts: { settings?: Record<string, unknown>; isolate?: boolean } = {},
): Promise<Rig> {
  const isolate = opts.isolate ?? true
  execFileSync('npm', ['run', '--silent', 'build'], { cwd: root, stdio: 'inherit' })
  // The bench's own servers (the baselines among them) compiled too: run through tsx's loader, a
  // bare proxy's RSS included the loader's (67 MB idle against 49 compiled), which the gated
  // proxy, run from dist/, does not carry.
  execFileSync(
    process.execPath,
    [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.bench.json'],
    {
      cwd: root,
      stdio: 'inherit',
    },
  )
  const children: ChildProcess[] = []
  const dbName = `wg_bench_${randomBytes(4).toString('hex')}`
  const admin = postgres(PG, { max: 1, onnotice: () => {} })
  await admin.unsafe(`create database ${dbName}`)
  const dbUrl = new URL(PG)
  dbUrl.pathname = `/${dbName}`
  const dir = mkdtempSync(join(tmpdir(), 'wg-bench-'))
  const prefix = `wgbench${randomBytes(3).toString('hex')}:`
  if (isolate) pinServers('1')
  const onCpu = (cpu: 0 | 1, args: string[]): [string, string[]] =>
    isolate ? ['taskset', ['-c', String(cpu), process.execPath, ...args]] : [process.execPath, args]

  const start: Rig['start'] = (args, cpu, env = {}) =>
    new Promise((resolve, reject) => {
      const profile = process.env.WG_BENCH_PROFILE
        ? ['--cpu-prof', `--cpu-prof-dir=${process.env.WG_BENCH_PROFILE}`]
        : []
      const [script, ...rest] = args as [string, ...string[]]
      const compiled = join(root, 'dist-bench', script.replace(/\.ts$/, '.js'))
      const child = spawn(...onCpu(cpu, [...profile, compiled, ...rest]), {
        cwd: root,
        env: { ...process.env, ...env },
        stdio: ['ignore', 'pipe', 'inherit'],
      })
      children.push(child)
      let buf = ''
      child.stdout?.on('data', (d) => {
        buf += d
        for (const line of buf.split('\n')) {
          try {
            const j = JSON.parse(line)
            if (typeof j.port === 'number') resolve({ port: j.port, child })
          } catch {}
        }
      })
      child.once('exit', (code) => reject(new Error(`${args.join(' ')} exited ${code}`)))
    })

  writeFileSync(join(dir, 'master.key'), randomBytes(32).toString('base64'))
  writeFileSync(
    join(dir, 'audit.pem'),
    generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }),
  )
  const shared = {
    redis: { keyPrefix: prefix },
    quota: { checksPerMonth: 100_000_000 },
    systems: { allowPrivateUpstreams: true },
    credentials: { allowEnv: ['BENCH_TOKEN'] },
    ...opts.settings,
  }
  const common = {
    WRITEGATE_REDIS_URL: REDIS,
    WRITEGATE_LOG_LEVEL: 'warn',
    WRITEGATE_MASTER_KEY_FILE: join(dir, 'master.key'),
    WRITEGATE_AUDIT_SIGNING_KEY_FILE: join(dir, 'audit.pem'),
    BENCH_TOKEN: 'bench-secret',
  }
  writeFileSync(join(dir, 'writegate.yaml'), stringify(shared))
  const cpPort = 18000 + Math.floor(Math.random() * 1000)
  const profile = process.env.WG_BENCH_PROFILE
    ? ['--cpu-prof', `--cpu-prof-dir=${process.env.WG_BENCH_PROFILE}`]
    : []
  const cp = spawn(
    ...onCpu(1, [...(process.env.WG_BENCH_CONTROL_PLANE_PROFILE ? profile : []), MAIN, 'start']),
    {
      cwd: root,
      env: {
        ...process.env,
        ...common,
        WRITEGATE_CONFIG: join(dir, 'writegate.yaml'),
        WRITEGATE_DATABASE_URL: dbUrl.toString(),
        WRITEGATE_PORT: String(cpPort),
        WRITEGATE_METRICS_PORT: '0',
      },
      stdio: ['ignore', 'ignore', 'inherit'],
    },
  )
  children.push(cp)
  const origin = `http://127.0.0.1:${cpPort}`
  await waitHttp(`${origin}/readyz`)
  const api: Rig['api'] = async (path, body, bearer, method = 'POST') => {
    const r = await fetch(`${origin}${path}`, {
      method,
      headers: {
        'content-type': 'application/json',
        ...(bearer ? { authorization: `Bearer ${bearer}` } : {}),
      },
      body: JSON.stringify(body),
    })
    const j = (await r.json()) as Record<string, unknown>
    if (r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${JSON.stringify(j)}`)
    return j
  }
  const tenant = (await api('/v1/keys', { email: 'bench@example.com' })) as {
    apiKey: string
    tenantId: string
  }
  const agent = await api('/v1/keys', { email: 'bench@example.com', scope: 'agent' }, tenant.apiKey)
  writeFileSync(join(dir, 'agent.key'), agent.apiKey as string)
  let nextPort = cpPort + 1

  const queued = () =>
    withRedis(async (r) => {
      let n = 0
      for (const key of await r.keys(`${prefix}*:rq`)) n += await r.xlen(key)
      return n
    })

  return {
    onCpu,
    start,
    api,
    tenant,
    agentKey: agent.apiKey as string,
    origin,
    databaseUrl: dbUrl.toString(),
    controlPlane: cp,
    async startProxy(settings = {}, env = {}) {
      const port = nextPort
      nextPort += 2
      const file = join(dir, `proxy-${port}.yaml`)
      writeFileSync(file, stringify({ ...shared, ...settings }))
      const child = spawn(
        ...onCpu(0, [
          ...(process.env.WG_BENCH_PROFILE
            ? ['--cpu-prof', `--cpu-prof-dir=${process.env.WG_BENCH_PROFILE}`]
            : []),
          MAIN,
          'proxy',
        ]),
        {
          cwd: root,
          env: {
            ...process.env,
            ...common,
            ...env,
            WRITEGATE_CONFIG: file,
            WRITEGATE_PROXY_API_KEY_FILE: join(dir, 'agent.key'),
            WRITEGATE_PROXY_PORT: String(port),
            WRITEGATE_METRICS_PORT: String(port + 1),
            WRITEGATE_PROXY_HOST: '127.0.0.1',
          },
          stdio: ['ignore', 'ignore', 'inherit'],
        },
      )
      children.push(child)
      await waitHttp(`http://127.0.0.1:${port}/readyz`)
      return { port, child }
    },
    pauseControlPlane() {
      if (cp.pid) process.kill(cp.pid, 'SIGSTOP')
    },
    async drain() {
      const before = await queued()
      const cpu = measureCpu({
        controlPlane: () => (cp.pid ? [cp.pid] : []),
        postgres: () => pidsOf('postgres'),
        redis: () => pidsOf('redis-server'),
      })
      // The control plane runs on hosts of its own in a deployment: for the drain it gets CPU 0,
      // which the proxies (idle now) leave free, and Postgres and Redis keep CPU 1. Sharing one
      // CPU with them, as before 2026-11-28, measured the CPU's contention more than the drain.
      if (isolate && cp.pid) execFileSync('taskset', ['-a', '-pc', '0', String(cp.pid)], { stdio: 'ignore' })
      const t0 = performance.now()
      if (cp.pid) process.kill(cp.pid, 'SIGCONT')
      let left = before
      while (left > 0 && performance.now() - t0 < 600_000) {
        await new Promise((r) => setTimeout(r, 250))
        left = await queued()
      }
      return { queued: before, seconds: (performance.now() - t0) / 1000, left, cpuMs: cpu() }
    },
    async close() {
      if (isolate)
        try {
          pinServers('0-1')
        } catch {}
      for (const c of children) if (c.pid && c.exitCode === null) process.kill(c.pid, 'SIGCONT')
      // Stop every process before dropping its database.
      await Promise.all(
        children.map(
          (c) =>
            new Promise<void>((resolve) => {
              if (c.exitCode !== null) return resolve()
              const timer = setTimeout(() => c.kill('SIGKILL'), 10_000)
              c.once('exit', () => {
                clearTimeout(timer)
                resolve()
              })
              c.kill('SIGTERM')
            }),
        ),
      )
      await admin.unsafe(`drop database if exists ${dbName} with (force)`).catch(() => {})
      await withRedis(async (r) => {
        const keys = await r.keys(`${prefix}*`)
        if (keys.length > 0) await r.del(...keys)
      }).catch(() => {})
      await admin.end()
    },
  }
}
