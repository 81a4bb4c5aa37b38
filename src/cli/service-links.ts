import { serviceLinkVariables } from '../config/load.js'
import type { Logger } from '../observability/logger.js'

/** Says which port variables were Kubernetes service links, left out of the settings (config/load.ts). */
export function logServiceLinks(logger: Logger, env: NodeJS.ProcessEnv = process.env): void {
  const variables = serviceLinkVariables(env)
  if (variables.length === 0) return
  logger.warn(
    { variables },
    'ignored Kubernetes service-link variables (a Service in this namespace is named like a writegate setting): set enableServiceLinks: false on the pod to drop them',
  )
}
