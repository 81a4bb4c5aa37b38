import type { Settings } from '../config/schema.js'
import { createLogger } from '../observability/logger.js'
import { startProxyProcess } from '../proxy/proxy-process.js'
import { logServiceLinks } from './service-links.js'
import { untilSignal } from './until-signal.js'

/**
 * `writegate proxy`: gate-proxy alone. Its own module, so a sidecar loads the proxy and nothing
 * of the control plane (fastify, the database drivers, the portal): its memory is the proxy's.
 */
export async function runProxy(settings: Settings): Promise<void> {
  const logger = createLogger(settings.log.level)
  logServiceLinks(logger)
  // Its proxy and metrics listeners each name their own setting when they cannot listen.
  const running = await startProxyProcess(settings, { logger })
  logger.info({ port: running.port, metricsPort: running.metricsPort }, 'writegate gate-proxy listening')
  untilSignal(logger, () => running.close())
}
