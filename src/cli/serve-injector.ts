import { listenAs } from '../config/listen-errors.js'
import type { Settings } from '../config/schema.js'
import { createInjector } from '../injector/injector-process.js'
import { logServiceLinks } from './service-links.js'
import { untilSignal } from './until-signal.js'

/** `writegate injector`: the admission webhook. */
export async function runInjector(settings: Settings): Promise<void> {
  const injector = createInjector(settings)
  logServiceLinks(injector.logger)
  const address = await listenAs('injector', settings.injector.host, settings.injector.port, (h) =>
    injector.listen(h),
  )
  injector.logger.info({ address: `${address.address}:${address.port}` }, 'writegate injector listening')
  untilSignal(injector.logger, () => injector.close())
}
