import type { Logger } from '../observability/logger.js'

/** Keeps the process up until SIGTERM or SIGINT, then closes cleanly. */
export function untilSignal(logger: Logger, close: () => Promise<void>): void {
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
