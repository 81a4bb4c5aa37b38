import { listenAs } from '../config/listen-errors.js'
import type { Settings } from '../config/schema.js'
import { createControlPlane } from '../control/control-plane.js'
import { startMetricsServer } from '../observability/metrics-server.js'
import { readProxyApiKey } from '../proxy/proxy-identity.js'
import { startProxy } from '../proxy/proxy-process.js'
import { logServiceLinks } from './service-links.js'
import { untilSignal } from './until-signal.js'

/** `writegate start`: the control plane (and, on the embedded default, gate-proxy beside it). */
export async function runControlPlane(settings: Settings): Promise<void> {
  const embedded = !settings.redis.url
  // The embedded proxy's key is a setting too: a bad one stops start-up before anything
  // listens, not after the API has said it is listening.
  if (embedded) readProxyApiKey(settings.proxy.apiKeyFile, process.env)
  const cp = await createControlPlane(settings)
  logServiceLinks(cp.logger)
  const address = await listenAs('server', settings.server.host, settings.server.port, (h) => cp.listen(h))
  // The single-process default runs the proxy too, over the same in-memory hot store (it names
  // its own port's setting when it cannot listen).
  const proxy = embedded
    ? await startProxy(settings, cp, { metricsServer: false, enrolRoutesFile: cp.enrolRoutesFile })
    : null
  const { host: metricsHost, port: metricsPort } = settings.metrics
  const metrics = await listenAs('metrics', metricsHost, metricsPort, (h) =>
    startMetricsServer(cp.metrics.registry, h, metricsPort, cp.logger),
  )
  cp.logger.info(
    {
      address,
      proxyPort: proxy?.port ?? null,
      metricsPort: metrics.port,
      storage: cp.storage.kind,
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
