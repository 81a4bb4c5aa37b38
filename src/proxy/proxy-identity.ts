import { readFileSync } from 'node:fs'
import { ConfigError } from '../config/load.js'
import { classifyCredential } from '../core/credentials.js'
import { hashSecret } from '../core/secret-hash.js'
import type { Logger } from '../observability/logger.js'
import type { HotStore, KeyRef } from '../store/ports/hot-store.js'

/** The API key the proxy acts as: from proxy.apiKeyFile, or WRITEGATE_PROXY_API_KEY for local runs. */
export function readProxyApiKey(
  file: string | undefined,
  env: NodeJS.ProcessEnv = process.env,
): string | null {
  // A bad key is reported under the name of the setting it came from.
  const source = file ? 'proxy.apiKeyFile (WRITEGATE_PROXY_API_KEY_FILE)' : 'WRITEGATE_PROXY_API_KEY'
  let key: string | undefined
  if (file) {
    try {
      key = readFileSync(file, 'utf8').trim()
    } catch (err) {
      throw new ConfigError(
        `invalid setting ${source}: cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? 'error'}`,
      )
    }
  } else key = env.WRITEGATE_PROXY_API_KEY?.trim()
  if (!key) return null
  if (classifyCredential(key) !== 'apiKey')
    throw new ConfigError(`invalid setting ${source}: not a writegate API key (svc_…)`)
  return key
}

/**
 * Looks the key up in the hot store's key index (no Postgres on the data path), retrying
 * until the control plane has indexed it. Until then the proxy is not ready and refuses writes.
 */
export function createProxyIdentity(deps: {
  hot: HotStore
  apiKey: string | null
  logger: Logger
  retryMs?: number
  /** Whether the route table enrols any system (a missing key only matters then). */
  hasRoutes: boolean
  /** Called once, when the key resolves. */
  onResolved?: (ref: KeyRef) => void
}) {
  let ref: KeyRef | null = null
  let timer: NodeJS.Timeout | undefined
  let stopped = false
  const hash = deps.apiKey ? hashSecret(deps.apiKey) : null
  async function attempt(): Promise<void> {
    if (!hash || ref || stopped) return
    try {
      ref = await deps.hot.resolveKey(hash)
      if (ref) {
        deps.logger.info({ tenantId: ref.tenantId, keyId: ref.keyId }, 'proxy identity resolved')
        deps.onResolved?.(ref)
      }
    } catch (err) {
      deps.logger.warn({ err }, 'cannot resolve the proxy key yet; will retry')
    }
    if (!ref && !stopped) timer = setTimeout(() => void attempt(), deps.retryMs ?? 1000)
  }
  // Worth a warning only when there is something to gate.
  if (!hash && deps.hasRoutes)
    deps.logger.warn(
      'no proxy API key configured (proxy.apiKeyFile or WRITEGATE_PROXY_API_KEY): gated writes are refused',
    )
  return {
    start: attempt,
    current: () => ref,
    stop() {
      stopped = true
      if (timer) clearTimeout(timer)
    },
  }
}
