import { ERRORS, WriteGateError } from '../core/errors.js'
import { isDatabaseUnavailable } from '../store/postgres/database-unavailable.js'
import { isHotStoreUnavailable } from '../store/redis/hot-store-unavailable.js'

/**
 * The 503 an error that is the service's outage deserves (a store unreachable), with the
 * reason; null for anything else. The API's and the portal's error handlers both answer by it.
 */
export function serviceUnavailable(err: { code?: unknown }): WriteGateError | null {
  if (isDatabaseUnavailable(err)) return new WriteGateError(ERRORS.unavailable, { reason: 'database' })
  if (isHotStoreUnavailable(err)) return new WriteGateError(ERRORS.unavailable, { reason: 'hot_store' })
  return null
}
