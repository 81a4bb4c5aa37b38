import type { Logger } from '../observability/logger.js'

/**
 * How long a clean close may take before the process exits anyway: inside Kubernetes' default
 * 30-second grace period, so the exit is ours, logged, not a SIGKILL.
 */
export const SHUTDOWN_DEADLINE_MS = 20_000

/** What `untilSignal` uses of the process (a test passes its own). */
export interface SignalHost {
  on(signal: 'SIGTERM' | 'SIGINT', listener: () => void): void
  exit(code: number): void
}

/**
 * Keeps the process up until SIGTERM or SIGINT, then closes cleanly. A close that does not
 * finish within the deadline (a database connection whose reply never comes, say: the process
 * stayed up for ever, found in review), fails, or is interrupted by a second signal ends the
 * process with status 1 and one line saying why.
 */
export function untilSignal(
  logger: Logger,
  close: () => Promise<void>,
  host: SignalHost = process,
  deadlineMs = SHUTDOWN_DEADLINE_MS,
): void {
  let stopping = false
  let deadline: NodeJS.Timeout | undefined
  const stop = (signal: string) => {
    if (stopping) {
      logger.warn({ signal }, 'second signal while shutting down: exiting now')
      // Every exit clears the deadline: a host whose exit returns (a test's) is not held by it.
      clearTimeout(deadline)
      host.exit(1)
      return
    }
    stopping = true
    logger.info({ signal }, 'shutting down')
    deadline = setTimeout(() => {
      logger.warn({ deadlineMs }, `shutdown did not finish within ${deadlineMs / 1000} s: exiting`)
      host.exit(1)
    }, deadlineMs)
    close().then(
      () => {
        clearTimeout(deadline)
        host.exit(0)
      },
      (err: unknown) => {
        clearTimeout(deadline)
        logger.warn({ err }, 'shutdown failed: exiting')
        host.exit(1)
      },
    )
  }
  host.on('SIGTERM', () => stop('SIGTERM'))
  host.on('SIGINT', () => stop('SIGINT'))
}
