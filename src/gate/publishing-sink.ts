import { ERRORS, WriteGateError } from '../core/errors.js'
import type { Logger } from '../observability/logger.js'
import type { HotStore } from '../store/ports/hot-store.js'
import type { DecisionStateSink } from './decision-state.js'

/**
 * The sink the services call after a commit. If the hot store cannot take the new
 * snapshot, the change is committed but not acknowledged: the caller gets 503
 * publish_pending (not in effect yet), and the reconciler publishes it as soon as it can.
 * Meanwhile commits fail closed if the old snapshot could be forgotten; a proxy that reaches a
 * hot store this process cannot (a partition) decides under the old one until then.
 */
export function publishingSink(
  inner: DecisionStateSink,
  hot: Pick<HotStore, 'invalidate'>,
  logger: Logger,
): DecisionStateSink {
  return {
    async changed(tenantId) {
      try {
        await inner.changed(tenantId)
      } catch (err) {
        logger.warn({ err, tenantId }, 'snapshot publish failed; the reconciler will retry')
        // Until the new state is published, no commit may land on the old one. If Redis is
        // down this fails too, and so does every commit: closed either way.
        await hot.invalidate(tenantId).catch(() => {})
        throw new WriteGateError(ERRORS.publishPending)
      }
    },
  }
}
