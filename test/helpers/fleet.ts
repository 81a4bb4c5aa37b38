import { randomBytes } from 'node:crypto'
import type { LookupFunction } from 'node:net'
import type { Test } from 'tap'
import { parseSettings } from '../../src/config/load.js'
import type { SystemsFile } from '../../src/config/systems.js'
import type { Logger } from '../../src/observability/logger.js'
import { type RunningProxy, startProxyProcess } from '../../src/proxy/proxy-process.js'
import { deriveKeyring, type Keyring } from '../../src/security/keyring.js'
import type { HotStore } from '../../src/store/ports/hot-store.js'
import { openTestDatabase, type TestDatabase } from './backends.js'
import { startControlPlane, type TestControlPlane } from './control-plane.js'
import { waitReady } from './proxy.js'
import { BILLING_CREDENTIALS, billingSystems, enrolSystems } from './proxy-fixtures.js'
import { openTestRedis } from './redis.js'
import { startRedisCluster } from './redis-cluster.js'
import { RecordingUpstream } from './upstream.js'

export interface Fleet extends TestControlPlane<'postgres'> {
  upstream: RecordingUpstream
  proxies: RunningProxy[]
  tenant: { apiKey: string; sponsorToken: string; tenantId: string; email: string; totp: { secret: string } }
  agent: { apiKey: string; keyId: string }
  redisUrl: string
  prefix: string
  keyring: Keyring
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
    /** The hot store on a private Redis Cluster of three masters instead of the shared Redis. */
    cluster?: boolean
    upstreamTimeoutMs?: number
    /** One logger for the control plane and every proxy (silent by default). */
    logger?: Logger
    /** The systems to enrol (default: the billing fixture on the recording upstream). */
    systems?: (upstreamOrigin: string) => SystemsFile
    /** Extra `proxy` settings for every proxy (TLS interception, say). */
    proxySettings?: Record<string, unknown>
    /**
     * Names, not loopback: upstreams held to public addresses (private upstreams not allowed),
     * their names resolved by `addressesOf` at enrolment and by `lookup` when connecting.
     */
    names?: {
      addressesOf: (host: string) => Promise<string[]>
      lookup: LookupFunction
      /** Allowed after all: then no upstream is held to public addresses. */
      allowPrivateUpstreams?: boolean
    }
  } = {},
): Promise<Fleet> {
  const redis = await openTestRedis()
  const cluster = opts.cluster ? await startRedisCluster(t) : null
  const redisUrl = opts.redisUrl ?? cluster?.url ?? redis.url
  const upstream = await new RecordingUpstream().start()
  const db: TestDatabase = await openTestDatabase('postgres')
  const shared = {
    redis: { url: redisUrl, keyPrefix: redis.prefix, mode: cluster ? 'cluster' : 'standalone' },
    // The upstream is on loopback: outside the embedded default, that must be allowed.
    systems: { allowPrivateUpstreams: !opts.names || opts.names.allowPrivateUpstreams === true },
    credentials: BILLING_CREDENTIALS,
    quota: { checksPerMonth: opts.quota ?? 100000 },
    hotStore: { reconcileIntervalMs: 500 },
  }
  // Kept, so a second control plane on the same database can read what this one encrypted.
  const keyring = deriveKeyring(randomBytes(32))
  const cp = await startControlPlane(t, 'postgres', {
    db,
    settings: shared,
    keyring,
    ...(opts.logger ? { logger: opts.logger } : {}),
    ...(opts.names ? { addressesOf: opts.names.addressesOf, lookup: opts.names.lookup } : {}),
  })
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
  await enrolSystems(cp.api, tenant.apiKey, (opts.systems ?? billingSystems)(upstream.origin))
  const proxies: RunningProxy[] = []
  const startOne = async (o: { deaf?: boolean } = {}) => {
    const settings = parseSettings({
      ...shared,
      log: { level: 'silent' },
      proxy: {
        port: 0,
        host: '127.0.0.1',
        upstreamTimeoutMs: opts.upstreamTimeoutMs ?? 30000,
        ...opts.proxySettings,
      },
      metrics: { port: 0, host: '127.0.0.1' },
    })
    const p = await startProxyProcess(settings, {
      env: { WRITEGATE_PROXY_API_KEY: agent.body.apiKey, BILLING_TOKEN: 'up-secret' },
      clock: cp.clock,
      ...(opts.logger ? { logger: opts.logger } : {}),
      ...(opts.names ? { lookup: opts.names.lookup } : {}),
      ...((o.deaf ?? opts.deaf) ? { wrapHotStore: deaf } : {}),
    })
    t.teardown(() => p.close())
    await waitReady(p)
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
    keyring,
    startProxy: startOne,
  }
}

/** Waits until the drain has moved the proxies' receipts: the count is eventually exact, never over. */
export async function waitForCount(
  read: () => Promise<number>,
  expected: number,
  timeoutMs = 30_000,
): Promise<number> {
  const deadline = Date.now() + timeoutMs
  let n = await read()
  while (n < expected && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 50))
    n = await read()
  }
  return n
}
