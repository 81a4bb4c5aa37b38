import { ConfigError } from '../config/load.js'
import type { Settings } from '../config/schema.js'
import { loadSystemsFile } from '../config/systems.js'
import { type Clock, nowSeconds, systemClock } from '../core/clock.js'
import { createDecisionPipeline } from '../gate/decision-pipeline.js'
import type { Gate } from '../gate/gate.js'
import type { SnapshotCache } from '../gate/snapshot-cache.js'
import type { Logger } from '../observability/logger.js'
import { createLogger } from '../observability/logger.js'
import { createMetrics, type Metrics } from '../observability/metrics.js'
import { startMetricsServer } from '../observability/metrics-server.js'
import type { HotStore } from '../store/ports/hot-store.js'
import { connectRedis } from '../store/redis/connect.js'
import { createRedisHotStore } from '../store/redis/hot-store.js'
import { createGateProxy, type GateProxy } from './gate-proxy.js'
import { createProxyIdentity, readProxyApiKey } from './proxy-identity.js'
import { RouteTable } from './route-table.js'
import { enrolledFor } from './system-tenancy.js'

export interface RunningProxy {
  readonly proxy: GateProxy
  readonly port: number
  readonly metricsPort: number | null
  close(): Promise<void>
}

export interface ProxyParts {
  hot: HotStore
  gate: Gate
  snapshots: SnapshotCache
  metrics: Metrics
  logger: Logger
  clock: Clock
}

function routeTableFrom(settings: Settings, env: NodeJS.ProcessEnv): RouteTable {
  const file = settings.proxy.routesFile ?? settings.systemsFile
  const systems = file
    ? loadSystemsFile(file, 'proxy.routesFile (WRITEGATE_ROUTES_FILE)')
    : { systems: [], passthrough: [] }
  return new RouteTable(systems, env, { upstreamTimeoutMs: settings.proxy.upstreamTimeoutMs })
}

/**
 * A route table may hold other tenants' systems (the embedded proxy falls back to the control
 * plane's systems file, which holds every tenant's). The proxy refuses them on every request;
 * this says so once, when it learns its tenant.
 */
function warnOfForeignSystems(table: RouteTable, tenantId: string, logger: Logger): void {
  const foreign = table.systems().filter((s) => !enrolledFor(s.system, tenantId))
  if (foreign.length === 0) return
  logger.warn(
    {
      tenantId,
      systems: foreign.map((s) => ({ systemId: s.system.systemId, tenantId: s.system.tenantId })),
    },
    "the route table enrols other tenants' systems: they are not enrolled for this proxy, and requests to them are refused",
  )
}

/** Starts the proxy over parts someone else built (the embedded default shares the control plane's). */
export async function startProxy(
  settings: Settings,
  parts: ProxyParts,
  opts: { metricsServer: boolean; env?: NodeJS.ProcessEnv },
): Promise<RunningProxy> {
  const env = opts.env ?? process.env
  const table = routeTableFrom(settings, env)
  const identity = createProxyIdentity({
    hot: parts.hot,
    apiKey: readProxyApiKey(settings.proxy.apiKeyFile, env),
    logger: parts.logger,
    hasRoutes: table.systems().length > 0,
    onResolved: (ref) => warnOfForeignSystems(table, ref.tenantId, parts.logger),
  })
  const proxy = createGateProxy({
    table,
    gate: parts.gate,
    snapshots: parts.snapshots,
    identity: () => identity.current(),
    clock: parts.clock,
    logger: parts.logger,
    metrics: parts.metrics,
    environment: settings.proxy.environment ?? null,
    maxStagedBodyBytes: settings.proxy.maxStagedBodyBytes,
  })
  const port = await proxy.listen(settings.proxy.port, settings.proxy.host)
  const metricsServer = opts.metricsServer
    ? await startMetricsServer(parts.metrics.registry, settings.metrics.host, settings.metrics.port)
    : null
  await identity.start()
  return {
    proxy,
    port,
    metricsPort: metricsServer?.port ?? null,
    async close() {
      identity.stop()
      await proxy.close()
      await metricsServer?.close()
      table.close()
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
}

export async function startProxyProcess(
  settings: Settings,
  overrides: ProxyProcessOverrides = {},
): Promise<RunningProxy> {
  if (!settings.redis.url)
    throw new ConfigError(
      'invalid setting redis.url (WRITEGATE_REDIS_URL): the proxy needs Redis (the shared hot store)',
    )
  if (!settings.proxy.routesFile)
    throw new ConfigError(
      'invalid setting proxy.routesFile (WRITEGATE_ROUTES_FILE): the proxy needs a route table',
    )
  const logger = overrides.logger ?? createLogger(settings.log.level)
  const clock = overrides.clock ?? systemClock
  const redisOpts = { url: settings.redis.url, keyPrefix: settings.redis.keyPrefix }
  const redis = connectRedis(redisOpts, 'commands', logger)
  const subscriber = connectRedis(redisOpts, 'subscriber', logger)
  // Not awaiting connect: the proxy starts and answers 503 until Redis is there (fail closed).
  redis.connect().catch((err) => logger.warn({ err }, 'Redis not reachable yet'))
  subscriber.connect().catch(() => {})
  const redisHot = createRedisHotStore({
    redis,
    subscriber,
    keyPrefix: settings.redis.keyPrefix,
    nowSeconds: () => nowSeconds(clock),
  })
  const hot = overrides.wrapHotStore ? overrides.wrapHotStore(redisHot) : redisHot
  const metrics = createMetrics('proxy')
  const { snapshots, gate } = createDecisionPipeline({
    hot,
    clock,
    metrics,
    quotaLimit: settings.quota.checksPerMonth,
  })
  const running = await startProxy(
    settings,
    { hot, gate, snapshots, metrics, logger, clock },
    { metricsServer: true, env: overrides.env },
  )
  return {
    ...running,
    async close() {
      await running.close()
      snapshots.close()
      await hot.close()
      redis.disconnect()
      subscriber.disconnect()
    },
  }
}
