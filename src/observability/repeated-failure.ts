import type { Logger } from './logger.js'

/** While a loop keeps failing the same way, how often it says so again. */
export const REPEAT_EVERY_MS = 60_000

/**
 * The warnings of a loop that retries (the drain, the reconciler, the stream poll): the first
 * failure is logged with its error, then at most one line a minute while it goes on (with how
 * many failures it stands for), and one line when it works again. A store away for an hour
 * leaves some sixty lines, not thousands of stack traces.
 */
export function repeatedFailure(logger: Logger, what: string, now: () => number = Date.now) {
  let failing = false
  let lastLogged = 0
  let since = 0
  return {
    failed(err: unknown): void {
      since += 1
      const at = now()
      if (failing && at - lastLogged < REPEAT_EVERY_MS) return
      logger.warn({ err, failures: since }, `${what} failed; will retry`)
      failing = true
      lastLogged = at
      since = 0
    },
    succeeded(): void {
      if (!failing) return
      logger.info(`${what} works again`)
      failing = false
      since = 0
    },
  }
}
