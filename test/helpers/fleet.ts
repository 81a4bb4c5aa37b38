import type { Test } from 'tap'
import { parseSettings } from '../../src/config/load.js'
import { type RunningProxy, startProxyProcess } from '../../src/proxy/proxy-process.js'
import type { HotStore } from '../../src/store/ports/hot-store.js'
import { openTestDatabase, type TestDatabase } from './backends.js'
import { startControlPlane, type TestControlPlane } from './control-plane.js'
import { billingSystems, writeRoutesFile } from './proxy-fixtures.js'
import { openTestRedis } from './redis.js'
import { RecordingUpstream } from './upstream.js'

export interface Fleet extends TestControlPlane {
  upstream: RecordingUpstream
  proxies: RunningProxy[]
  tenant: { apiKey: string; sponsorToken: string; tenantId: string; email: string }
  agent: { apiKey: string; keyId: string }
  redisUrl: string
  prefix: string
  routesFile: string
  startProxy(opts?: { deaf?: boolean }): Promise<RunningProxy>
}

/** A hot store whose pub/sub never fires: invalidations lost, on purpose. */
export function deaf(hot: HotStore): HotStore {
  return { ...hot, subscribe: () => () => {}, receiptQueue: hot.receiptQueue }
}

/**
 * The production shape on one machine: a control plane on real Postgres with the Redis hot
 * store, N gate-proxies (each with its own Redis connections and snapshot cache) acting as
 * one agent key, and a real upstream on loopback.
 */
export async function startFleet(
  t: Test,
  opts: {
    proxies?: number
    deaf?: boolean
    quota?: number
    redisUrl?: string
    upstreamTimeoutMs?: number
  } = {},
): Promise<Fleet> {
  const redis = await openTestRedis()
  const redisUrl = opts.redisUrl ?? redis.url
  const upstream = await new RecordingUpstream().start()
  const db: TestDatabase = await openTestDatabase('postgres')
  const shared = {
    redis: { url: redisUrl, keyPrefix: redis.prefix },
    quota: { checksPerMonth: opts.quota ?? 100000 },
    hotStore: { reconcileIntervalMs: 500 },
  }
  const cp = await startControlPlane(t, 'postgres', { db, settings: shared })
  t.teardown(async () => {
    await upstream.close()
    await redis.close()
    await db.close()
  })
  const tenant = await cp.api.newTenant()
  const agent = await cp.api.post(
    '/v1/keys',
    { email: tenant.email, scope: 'agent' },
    { bearer: tenant.apiKey },
  )
  const routesFile = writeRoutesFile(billingSystems(upstream.origin))
  const proxies: RunningProxy[] = []
  const startOne = async (o: { deaf?: boolean } = {}) => {
    const settings = parseSettings({
      ...shared,
      log: { level: 'silent' },
      proxy: { port: 0, host: '127.0.0.1', routesFile, upstreamTimeoutMs: opts.upstreamTimeoutMs ?? 30000 },
      metrics: { port: 0, host: '127.0.0.1' },
    })
    const p = await startProxyProcess(settings, {
      env: { WRITEGATE_PROXY_API_KEY: agent.body.apiKey, BILLING_TOKEN: 'up-secret' },
      clock: cp.clock,
      ...((o.deaf ?? opts.deaf) ? { wrapHotStore: deaf } : {}),
    })
    t.teardown(() => p.close())
    for (let i = 0; i < 200 && !(await p.proxy.ready()); i++) await new Promise((r) => setTimeout(r, 25))
    proxies.push(p)
    return p
  }
  for (let i = 0; i < (opts.proxies ?? 2); i++) await startOne()
  return {
    ...cp,
    upstream,
    proxies,
    tenant,
    agent: agent.body,
    redisUrl,
    prefix: redis.prefix,
    routesFile,
    startProxy: startOne,
  }
}

/** Waits until the drain has moved the proxies' receipts: the count is eventually exact, never over. */
export async function waitForCount(
  read: () => Promise<number>,
  expected: number,
  timeoutMs = 10_000,
): Promise<number> {
  const deadline = Date.now() + timeoutMs
  let n = await read()
  while (n < expected && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 50))
    n = await read()
  }
  return n
}
