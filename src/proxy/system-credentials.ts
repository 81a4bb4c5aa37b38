import type { SystemRecord } from '../core/enrolled-system.js'
import type { CredentialResolver, ResolvedCredential } from '../systems/credential-resolver.js'

export interface SystemCredentials {
  /** The credential to inject for a system, resolved in this process; null when the system takes none. */
  get(system: SystemRecord): ResolvedCredential | null
  /** Systems whose credential could not be resolved the last time it was asked for. */
  problems(): { systemId: string; problem: string }[]
}

/**
 * Credentials resolved once per version of a system and again every `refreshMs` (a mounted
 * Secret is rotated in place), never per request. A change in whether a system's credential
 * resolves is reported once (`onChange`): logged, and a metric.
 */
export function createSystemCredentials(deps: {
  resolver: CredentialResolver
  nowMs: () => number
  refreshMs: number
  onChange?: (systemId: string, problem: string | null) => void
}): SystemCredentials {
  const cache = new Map<string, { version: number; at: number; resolved: ResolvedCredential }>()
  const problems = new Map<string, string>()

  return {
    get(system) {
      if (!system.credential) return null
      const key = `${system.tenantId}/${system.systemId}`
      const now = deps.nowMs()
      const c = cache.get(key)
      if (c && c.version === system.version && now - c.at < deps.refreshMs) return c.resolved
      const resolved = deps.resolver.resolve(system.tenantId, system.credential, system)
      cache.set(key, { version: system.version, at: now, resolved })
      const before = problems.get(system.systemId) ?? null
      const after = resolved.ok ? null : resolved.problem
      if (after === null) problems.delete(system.systemId)
      else problems.set(system.systemId, after)
      if (before !== after) deps.onChange?.(system.systemId, after)
      return resolved
    },
    problems() {
      return [...problems.entries()].map(([systemId, problem]) => ({ systemId, problem }))
    },
  }
}
