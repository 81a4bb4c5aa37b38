import { type ChildProcess, execFile, spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { Cluster } from 'ioredis'
import type { Test } from 'tap'

const run = promisify(execFile)

/** Cluster bus ports are the node's port + 10000: pick ports whose bus port is free too. */
async function freePortPair(): Promise<number> {
  for (;;) {
    const port = await new Promise<number>((resolve) => {
      const s = createServer().listen(0, '127.0.0.1', () => {
        const p = (s.address() as { port: number }).port
        s.close(() => resolve(p))
      })
    })
    if (port + 10000 > 65535) continue
    const busFree = await new Promise<boolean>((resolve) => {
      const s = createServer()
      s.once('error', () => resolve(false))
      s.listen(port + 10000, '127.0.0.1', () => s.close(() => resolve(true)))
    })
    if (busFree) return port
  }
}

export interface TestRedisCluster {
  /** A seed node's URL, as `redis.url` names it with `redis.cluster: true`. */
  url: string
  ports: number[]
  /** A client of the whole cluster, for assertions. */
  client: Cluster
}

/**
 * A real Redis Cluster of three masters on loopback, from Debian's redis-server and
 * redis-cli (`--cluster create`), private to the test and gone at its teardown. Slots are
 * spread over the three, so keys of different tenants land on different nodes, and a script
 * naming keys of two slots fails with CROSSSLOT, as in production.
 */
export async function startRedisCluster(t: Test): Promise<TestRedisCluster> {
  const dir = mkdtempSync(join(tmpdir(), 'wg-redis-cluster-'))
  const children: ChildProcess[] = []
  const ports: number[] = []
  let client: Cluster | undefined
  t.teardown(async () => {
    client?.disconnect()
    await Promise.all(
      children.map(
        (c) =>
          new Promise<void>((resolve) => {
            if (c.exitCode !== null) return resolve()
            c.once('exit', () => resolve())
            c.kill('SIGKILL')
          }),
      ),
    )
    rmSync(dir, { recursive: true, force: true })
  })
  for (let i = 0; i < 3; i++) {
    const port = await freePortPair()
    ports.push(port)
    const child = spawn(
      'redis-server',
      [
        '--port',
        String(port),
        '--bind',
        '127.0.0.1',
        '--cluster-enabled',
        'yes',
        '--cluster-config-file',
        join(dir, `nodes-${port}.conf`),
        '--cluster-node-timeout',
        '2000',
        '--dir',
        dir,
        '--save',
        '',
        '--appendonly',
        'no',
      ],
      { stdio: 'ignore' },
    )
    children.push(child)
  }
  for (const port of ports) await waitFor(async () => (await cli(port, 'ping')) === 'PONG')
  await run('redis-cli', [
    '--cluster',
    'create',
    ...ports.map((p) => `127.0.0.1:${p}`),
    '--cluster-replicas',
    '0',
    '--cluster-yes',
  ])
  for (const port of ports)
    await waitFor(async () => /cluster_state:ok/.test(await cli(port, 'cluster', 'info')))
  client = new Cluster([{ host: '127.0.0.1', port: ports[0] as number }], { lazyConnect: true })
  await client.connect()
  return { url: `redis://127.0.0.1:${ports[0]}`, ports, client }
}

async function cli(port: number, ...args: string[]): Promise<string> {
  try {
    const { stdout } = await run('redis-cli', ['-p', String(port), ...args])
    return stdout.trim()
  } catch {
    return ''
  }
}

async function waitFor(ok: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (await ok()) return
    await new Promise((r) => setTimeout(r, 50))
  }
  throw new Error('Redis Cluster did not come up')
}
