import { listenAs } from '../config/listen-errors.js'
import { loadSettings } from '../config/load.js'
import { createControlPlane } from '../control/control-plane.js'
import { createInjector } from '../injector/injector-process.js'
import { createLogger, type Logger } from '../observability/logger.js'
import { startMetricsServer } from '../observability/metrics-server.js'
import { startProxy, startProxyProcess } from '../proxy/proxy-process.js'

/** `writegate start`, `proxy` and `injector`: the long-running processes. */

/** Keeps the process up until SIGTERM or SIGINT, then closes cleanly. */
function untilSignal(logger: Logger, close: () => Promise<void>): void {
  let stopping = false
  const stop = async (signal: string) => {
    if (stopping) return
    stopping = true
    logger.info({ signal }, 'shutting down')
    await close()
    process.exit(0)
  }
  process.on('SIGTERM', () => void stop('SIGTERM'))
  process.on('SIGINT', () => void stop('SIGINT'))
}

export async function runControlPlane(): Promise<void> {
  const settings = loadSettings()
  const cp = await createControlPlane(settings)
  const address = await listenAs('server', settings.server.host, settings.server.port, () => cp.listen())
  const embedded = !settings.redis.url
  // The single-process default runs the proxy too, over the same in-memory hot store (it names
  // its own port's setting when it cannot listen).
  const proxy = embedded
    ? await startProxy(settings, cp, { metricsServer: false, enrolRoutesFile: cp.enrolRoutesFile })
    : null
  const { host: metricsHost, port: metricsPort } = settings.metrics
  const metrics = await listenAs('metrics', metricsHost, metricsPort, () =>
    startMetricsServer(cp.metrics.registry, metricsHost, metricsPort, cp.logger),
  )
  cp.logger.info(
    {
      address,
      proxyPort: proxy?.port ?? null,
      metricsPort: metrics.port,
      storage: cp.database.kind,
      hotStore: embedded ? 'memory' : 'redis',
    },
    'writegate control plane listening',
  )
  untilSignal(cp.logger, async () => {
    await proxy?.close()
    await metrics.close()
    await cp.close()
  })
}

export async function runProxy(): Promise<void> {
  const settings = loadSettings()
  const logger = createLogger(settings.log.level)
  // Its proxy and metrics listeners each name their own setting when they cannot listen.
  const running = await startProxyProcess(settings, { logger })
  logger.info({ port: running.port, metricsPort: running.metricsPort }, 'writegate gate-proxy listening')
  untilSignal(logger, () => running.close())
}

export async function runInjector(): Promise<void> {
  const settings = loadSettings()
  const injector = createInjector(settings)
  const address = await listenAs('injector', settings.injector.host, settings.injector.port, () =>
    injector.listen(),
  )
  injector.logger.info({ address: `${address.address}:${address.port}` }, 'writegate injector listening')
  untilSignal(injector.logger, () => injector.close())
}
