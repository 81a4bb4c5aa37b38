import { readFileSync } from 'node:fs'
import { ConfigError, SET_BUT_EMPTY } from '../config/load.js'
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
  } else {
    if (env.WRITEGATE_PROXY_API_KEY?.trim() === '')
      throw new ConfigError(`invalid setting ${source}: ${SET_BUT_EMPTY}`)
    key = env.WRITEGATE_PROXY_API_KEY?.trim()
  }
  if (!key) return null
  if (classifyCredential(key) !== 'apiKey')
    throw new ConfigError(`invalid setting ${source}: not a writegate API key (svc_…)`)
  return key
}

export type IdentityStatus =
  | { kind: 'resolved'; ref: KeyRef }
  /** No key is configured (proxy.apiKeyFile or WRITEGATE_PROXY_API_KEY). */
  | { kind: 'no_key' }
  /** The hot store answers, but knows no such key: not issued, or the control plane is on another Redis or key prefix. */
  | { kind: 'unknown_key' }
  | { kind: 'hot_store_unreachable' }
  /** Not asked yet. */
  | { kind: 'resolving' }

export interface ProxyIdentity {
  start(): Promise<void>
  current(): KeyRef | null
  status(): IdentityStatus
  stop(): void
}

/**
 * Looks the key up in the hot store's key index (no Postgres on the data path), retrying
 * until the control plane has indexed it. Until then the proxy is not ready and refuses
 * writes; its status says why (the proxy's readiness logs each change once).
 */
export function createProxyIdentity(deps: {
  hot: HotStore
  apiKey: string | null
  logger: Logger
  retryMs?: number
  /** Called once, when the key resolves. */
  onResolved?: (ref: KeyRef) => void
}): ProxyIdentity {
  let status: IdentityStatus = deps.apiKey ? { kind: 'resolving' } : { kind: 'no_key' }
  let timer: NodeJS.Timeout | undefined
  let stopped = false
  const hash = deps.apiKey ? hashSecret(deps.apiKey) : null

  function become(next: IdentityStatus): void {
    if (next.kind === status.kind) return
    status = next
    if (next.kind === 'resolved') {
      deps.logger.info({ tenantId: next.ref.tenantId, keyId: next.ref.keyId }, 'proxy identity resolved')
      deps.onResolved?.(next.ref)
    }
  }

  const resolved = () => status.kind === 'resolved'
  async function attempt(): Promise<void> {
    if (!hash || resolved() || stopped) return
    try {
      const ref = await deps.hot.resolveKey(hash)
      become(ref ? { kind: 'resolved', ref } : { kind: 'unknown_key' })
    } catch {
      become({ kind: 'hot_store_unreachable' })
    }
    if (!resolved() && !stopped) {
      timer = setTimeout(() => void attempt(), deps.retryMs ?? 1000)
      timer.unref()
    }
  }
  return {
    start: attempt,
    current: () => (status.kind === 'resolved' ? status.ref : null),
    status: () => status,
    stop() {
      stopped = true
      if (timer) clearTimeout(timer)
    },
  }
}
