import { ERRORS, WriteGateError } from '../core/errors.js'
import type { Logger } from '../observability/logger.js'
import type { DecisionStateSink } from './decision-state.js'

/**
 * The sink the services call after a commit. If the hot store cannot take the new
 * snapshot, the change is committed but not acknowledged: the caller gets 503
 * publish_pending (decisions meanwhile fail closed at commit, never use the old state),
 * and the reconciler publishes it as soon as it can.
 */
export function publishingSink(inner: DecisionStateSink, logger: Logger): DecisionStateSink {
  return {
    async changed(tenantId) {
      try {
        await inner.changed(tenantId)
      } catch (err) {
        logger.warn({ err, tenantId }, 'snapshot publish failed; the reconciler will retry')
        throw new WriteGateError(ERRORS.publishPending)
      }
    },
  }
}
