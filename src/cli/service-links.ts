import { serviceLinkVariables, unknownVariables } from '../config/load.js'
import type { Logger } from '../observability/logger.js'

/**
 * Says which variables were left out of the settings (config/load.ts): port variables that were
 * Kubernetes service links, and `WRITEGATE_` variables no setting reads.
 */
export function logServiceLinks(logger: Logger, env: NodeJS.ProcessEnv = process.env): void {
  const unknown = unknownVariables(env)
  if (unknown.length > 0)
    logger.warn({ variables: unknown }, 'ignored WRITEGATE_ variables that no setting reads (a typo?)')
  const variables = serviceLinkVariables(env)
  if (variables.length === 0) return
  logger.warn(
    { variables },
    'ignored Kubernetes service-link variables (a Service in this namespace is named like a writegate setting): set enableServiceLinks: false on the pod to drop them',
  )
}
