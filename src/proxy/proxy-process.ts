import { readFileSync } from 'node:fs'
import type { Agent as HttpAgent } from 'node:http'
import type { LookupFunction } from 'node:net'
import { performance } from 'node:perf_hooks'
import { listenAs } from '../config/listen-errors.js'
import { ConfigError } from '../config/load.js'
import type { Settings } from '../config/schema.js'
import { loadSystemsFile, type SystemsFile } from '../config/systems.js'
import { type Clock, nowSeconds, systemClock } from '../core/clock.js'
import { createDecisionPipeline } from '../gate/decision-pipeline.js'
import type { GatedWrites } from '../gate/gated-write.js'
import type { SnapshotCache } from '../gate/snapshot-cache.js'
import type { Logger } from '../observability/logger.js'
import { createLogger } from '../observability/logger.js'
import { createMetrics, type Metrics } from '../observability/metrics.js'
import { startMetricsServer } from '../observability/metrics-server.js'
import type { HotStore } from '../store/ports/hot-store.js'
import { connectOnce, connectRedis } from '../store/redis/connect.js'
import { createRedisHotStore } from '../store/redis/hot-store.js'
import { credentialResolverFor } from '../systems/credential-resolver.js'
import { publicOnlyLookup } from '../systems/public-address-lookup.js'
import { createGateProxy, type GateProxy, type UpstreamConnection } from './gate-proxy.js'
import { localSystemsFrom } from './local-systems.js'
import { createProxyIdentity, readProxyApiKey } from './proxy-identity.js'
import { createSystemCredentials } from './system-credentials.js'
import { createTlsInterception, type TlsInterception } from './tls-interception.js'
import { createUpstreamAgent } from './upstream-agent.js'

export interface RunningProxy {
  readonly proxy: GateProxy
  readonly port: number
  /** Transparent mode's TLS port; null without one. */
  readonly tlsPort: number | null
  readonly metricsPort: number | null
  close(): Promise<void>
}

export interface ProxyParts {
  hot: HotStore
  writes: GatedWrites
  snapshots: SnapshotCache
  metrics: Metrics
  logger: Logger
  clock: Clock
  /** How upstream names are resolved (tests point names at loopback); the system resolver if absent. */
  lookup?: LookupFunction | undefined
}

/** The variable that switches http-proxy-3 to its fetch path (test/proxy/fetch-path-variable.test.ts pins it). */
export const FETCH_PATH_VARIABLE = 'FORCE_FETCH_PATH'

/** A deprecated route table file, read once; its systems are served beside the tenant's enrolled ones. */
function routesFileOf(settings: Settings, logger: Logger): SystemsFile | null {
  const file = settings.proxy.routesFile
  if (!file) return null
  const systems = loadSystemsFile(file, 'proxy.routesFile (WRITEGATE_ROUTES_FILE)')
  logger.warn(
    { file, systems: systems.systems.map((s) => s.systemId) },
    'proxy.routesFile (WRITEGATE_ROUTES_FILE) is deprecated and will be removed in the next release: enrol these systems with `writegate systems apply -f <file>`',
  )
  return systems
}

/**
 * One keep-alive agent per upstream origin, shared by the systems on it that verify it alike and
 * are held to the same addresses (a `publicOnly` system's connections resolve through
 * publicOnlyLookup; another tenant's system on the same origin may not be).
 */
function agentsPerOrigin(upstreamTimeoutMs: number, lookup: LookupFunction | undefined) {
  const agents = new Map<string, HttpAgent>()
  const publicOnly = publicOnlyLookup(lookup)
  return {
    agentFor(origin: URL, how: UpstreamConnection): HttpAgent {
      const key = `${origin.origin}\n${how.publicOnly ? 'public' : 'any'}\n${how.caBundle ?? ''}`
      let agent = agents.get(key)
      if (!agent) {
        agent = createUpstreamAgent(
          origin,
          upstreamTimeoutMs,
          how.caBundle,
          how.publicOnly ? publicOnly : lookup,
        )
        agents.set(key, agent)
      }
      return agent
    },
    close() {
      for (const a of agents.values()) a.destroy()
    },
  }
}

/**
 * Logs the proxy's readiness once per change (why it is not ready, or that it is), and
 * reports credentials it cannot resolve; polled, since its inputs (Redis, the key index, the
 * tenant's snapshot) change without telling the proxy.
 */
const NOT_READY: Record<string, string> = {
  no_key: 'no proxy API key configured (proxy.apiKeyFile or WRITEGATE_PROXY_API_KEY): every write is refused',
  unknown_key:
    'the proxy API key is not known to the hot store: it was never issued, or the control plane uses another Redis or key prefix (redis.url, redis.keyPrefix); every write is refused until it is',
  hot_store_unreachable: 'the hot store (Redis) is unreachable: every write is refused until it is back',
  no_snapshot:
    "the hot store holds no snapshot of the key's tenant yet (is its control plane running on this Redis?): every write is refused",
  no_systems:
    "the key's tenant enrols no system yet (POST /v1/systems): every request is refused as not enrolled",
}

function watchReadiness(proxy: GateProxy, logger: Logger, everyMs: number): () => void {
  let last: string | null = null
  let running = false
  const check = async () => {
    if (running) return
    running = true
    try {
      const r = await proxy.readiness()
      const now = r.ready ? 'ready' : (r.reason ?? 'not_ready')
      if (now !== last) {
        if (r.ready) logger.info('gate-proxy ready')
        // A key still being looked up is a start, not a state worth a warning.
        else if (now !== 'resolving')
          logger.warn({ reason: now }, `gate-proxy not ready: ${NOT_READY[now] ?? now}`)
        last = now
      }
    } finally {
      running = false
    }
  }
  const timer = setInterval(() => void check(), everyMs)
  timer.unref()
  void check()
  return () => clearInterval(timer)
}

/** Starts the proxy over parts someone else built (the embedded default shares the control plane's). */
/**
 * The proxy's TLS interception, when it has an interception CA: its files are read once, and a
 * CA that cannot be read, or has no name constraints, stops start-up naming the setting.
 */
async function interceptionOf(settings: Settings, parts: ProxyParts): Promise<TlsInterception | null> {
  const { caCertFile, caKeyFile, leafTtlSeconds, leafCacheSize, handshakeTimeoutMs } = settings.proxy.tls
  if (!caCertFile || !caKeyFile) return null
  const read = (file: string, setting: string) => {
    try {
      return readFileSync(file, 'utf8')
    } catch (err) {
      throw new ConfigError(
        `invalid setting ${setting}: cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? 'error'}`,
      )
    }
  }
  const certPem = read(caCertFile, 'proxy.tls.caCertFile (WRITEGATE_PROXY_TLS_CA_CERT_FILE)')
  const keyPem = read(caKeyFile, 'proxy.tls.caKeyFile (WRITEGATE_PROXY_TLS_CA_KEY_FILE)')
  // Loaded only with a CA: the X.509 library is a fifth of an idle proxy's memory.
  const { loadInterceptionCa } = await import('../tls/interception-ca.js')
  const { createLeafMinter } = await import('../tls/leaf-minter.js')
  let ca: Awaited<ReturnType<typeof loadInterceptionCa>>
  try {
    ca = await loadInterceptionCa(certPem, keyPem)
  } catch (err) {
    const setting =
      (err as { file?: string }).file === 'key'
        ? 'proxy.tls.caKeyFile (WRITEGATE_PROXY_TLS_CA_KEY_FILE)'
        : 'proxy.tls.caCertFile (WRITEGATE_PROXY_TLS_CA_CERT_FILE)'
    throw new ConfigError(`invalid setting ${setting}: ${(err as Error).message.split('\n')[0]}`)
  }
  const minter = await createLeafMinter(ca, { ttlSeconds: leafTtlSeconds, cacheSize: leafCacheSize })
  parts.logger.info(
    { hosts: ca.permitted },
    'TLS interception on: CONNECTs to these enrolled hosts are gated',
  )
  return createTlsInterception({ minter, handshakeTimeoutMs, metrics: parts.metrics, logger: parts.logger })
}

export async function startProxy(
  settings: Settings,
  parts: ProxyParts,
  opts: {
    metricsServer: boolean
    env?: NodeJS.ProcessEnv
    /**
     * The embedded default enrols its route table file's systems for the proxy's tenant when
     * the key resolves, so they are decision state (and their staged writes can be approved).
     */
    enrolRoutesFile?: (tenantId: string, file: SystemsFile) => Promise<void>
  },
): Promise<RunningProxy> {
  const env = opts.env ?? process.env
  // http-proxy-3 forwards with fetch when this is "true", read from the process's environment on
  // every request: that path follows redirects (the injected credential with them) and bypasses
  // the upstream agents (their timeouts, CA bundles and public-address rule).
  if (process.env[FETCH_PATH_VARIABLE] !== undefined)
    throw new ConfigError(
      `environment variable ${FETCH_PATH_VARIABLE} is set: http-proxy-3 would forward with fetch, which follows redirects and bypasses writegate's upstream connections; unset it`,
    )
  const routesFile = routesFileOf(settings, parts.logger)
  const agents = agentsPerOrigin(settings.proxy.upstreamTimeoutMs, parts.lookup)
  const credentials = createSystemCredentials({
    resolver: credentialResolverFor(settings.credentials, env, [routesFile]),
    // Wall time, not the decision clock: this is how often a mounted secret is read again.
    nowMs: () => performance.now(),
    refreshMs: settings.credentials.refreshSeconds * 1000,
    onChange(systemId, problem) {
      parts.metrics.credentialUnavailable(systemId, problem !== null)
      if (problem)
        parts.logger.warn(
          { systemId, problem },
          'the credential of an enrolled system is unavailable: its writes are refused',
        )
      else parts.logger.info({ systemId }, 'the credential of an enrolled system is available again')
    },
  })
  const enrol = opts.enrolRoutesFile
  const identity = createProxyIdentity({
    hot: parts.hot,
    apiKey: readProxyApiKey(settings.proxy.apiKeyFile, env),
    logger: parts.logger,
    onResolved: (ref) => {
      if (enrol && routesFile)
        enrol(ref.tenantId, routesFile).catch((err) =>
          parts.logger.warn(
            { err, tenantId: ref.tenantId },
            "could not enrol the route table file's systems",
          ),
        )
    },
  })
  const proxy = createGateProxy({
    writes: parts.writes,
    snapshots: parts.snapshots,
    identity,
    // Enrolled by the control plane in the embedded default: no second, unversioned copy.
    local: localSystemsFrom(enrol ? null : routesFile),
    passthrough: new Set(
      [...(routesFile?.passthrough ?? []), ...settings.proxy.passthrough].map((h) => h.toLowerCase()),
    ),
    tlsPassthroughPort: settings.proxy.tls.passthroughPort,
    remoteClients: settings.proxy.remoteClients,
    agentFor: (origin, how) => agents.agentFor(origin, how),
    hotStoreReachable: (tenantId) => parts.hot.version(tenantId),
    hotVersion: (tenantId) => parts.hot.version(tenantId),
    interception: await interceptionOf(settings, parts),
    credentials,
    clock: parts.clock,
    logger: parts.logger,
    metrics: parts.metrics,
    environment: settings.proxy.environment ?? null,
    maxStagedBodyBytes: settings.proxy.maxStagedBodyBytes,
    maxInspectedBodyBytes: settings.proxy.maxInspectedBodyBytes,
  })
  const { host, port: wanted } = settings.proxy
  const port = await listenAs('proxy', host, wanted, (h) => proxy.listen(wanted, h)).catch(async (err) => {
    agents.close()
    throw err
  })
  const tlsPort =
    settings.proxy.tls.port === undefined
      ? null
      : await listenAs('proxy.tls', host, settings.proxy.tls.port, (h) =>
          proxy.listenTls(settings.proxy.tls.port as number, h),
        ).catch(async (err) => {
          await proxy.close()
          agents.close()
          throw err
        })
  const { host: metricsHost, port: metricsPort } = settings.metrics
  const metricsServer = opts.metricsServer
    ? await listenAs('metrics', metricsHost, metricsPort, (h) =>
        startMetricsServer(parts.metrics.registry, h, metricsPort, parts.logger),
      ).catch(async (err) => {
        await proxy.close()
        agents.close()
        throw err
      })
    : null
  await identity.start()
  const stopWatching = watchReadiness(proxy, parts.logger, 2000)
  return {
    proxy,
    port,
    tlsPort,
    metricsPort: metricsServer?.port ?? null,
    async close() {
      stopWatching()
      identity.stop()
      await proxy.close()
      await metricsServer?.close()
      agents.close()
    },
  }
}

/**
 * The sidecar's composition root: Redis for snapshots and commits, the route table, the
 * key it acts as, and Prometheus metrics. It never talks to Postgres.
 */
export interface ProxyProcessOverrides {
  clock?: Clock
  logger?: Logger
  env?: NodeJS.ProcessEnv
  /** Tests wrap the hot store (to lose invalidations on purpose, say). */
  wrapHotStore?: (hot: HotStore) => HotStore
  /** Tests resolve upstream names their own way (a rebinding name, say). */
  lookup?: LookupFunction
}

export async function startProxyProcess(
  settings: Settings,
  overrides: ProxyProcessOverrides = {},
): Promise<RunningProxy> {
  if (!settings.redis.url)
    throw new ConfigError(
      'invalid setting redis.url (WRITEGATE_REDIS_URL): the proxy needs Redis (the shared hot store)',
    )
  const logger = overrides.logger ?? createLogger(settings.log.level)
  const clock = overrides.clock ?? systemClock
  const redisOpts = {
    url: settings.redis.url,
    keyPrefix: settings.redis.keyPrefix,
    cluster: settings.redis.mode === 'cluster',
  }
  const redis = connectRedis(redisOpts, 'commands', logger)
  const subscriber = connectRedis(redisOpts, 'subscriber', logger)
  // Connect before the first lookup (a healthy start logs nothing), but do not wait long: a
  // proxy whose Redis is down starts, answers 503 (fail closed) and says why in /readyz.
  // A server that answers but refuses us (a password, a database it does not have) is a bad
  // setting, not an outage: refused here in one line, as the control plane does.
  let refused: Error | null = null
  await Promise.race([
    connectOnce(redis).catch((err: Error) => {
      if (err.name === 'ReplyError') refused = err
    }),
    new Promise((resolve) => setTimeout(resolve, 2000).unref()),
  ])
  if (refused) {
    redis.disconnect()
    subscriber.disconnect()
    const line = ((refused as Error).message || 'error').split('\n')[0]
    throw new ConfigError(`invalid setting redis.url (WRITEGATE_REDIS_URL): cannot connect: ${line}`)
  }
  subscriber.connect().catch(() => {})
  const redisHot = createRedisHotStore({
    redis,
    subscriber,
    keyPrefix: settings.redis.keyPrefix,
    nowSeconds: () => nowSeconds(clock),
  })
  const hot = overrides.wrapHotStore ? overrides.wrapHotStore(redisHot) : redisHot
  const metrics = createMetrics('proxy')
  const { snapshots, writes } = createDecisionPipeline({
    hot,
    clock,
    metrics,
    quotaLimit: settings.quota.checksPerMonth,
  })
  const closeParts = async () => {
    snapshots.close()
    await hot.close()
    redis.disconnect()
    subscriber.disconnect()
  }
  const running = await startProxy(
    settings,
    { hot, writes, snapshots, metrics, logger, clock, lookup: overrides.lookup },
    { metricsServer: true, env: overrides.env },
  ).catch(async (err) => {
    await closeParts()
    throw err
  })
  return {
    ...running,
    async close() {
      await running.close()
      await closeParts()
    },
  }
}
