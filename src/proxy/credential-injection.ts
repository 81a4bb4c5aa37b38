import type { ServerResponse } from 'node:http'
import { echoNeedles } from '../core/credential-echo.js'
import type { SystemRecord } from '../core/enrolled-system.js'
import { ERRORS, type ErrorDef } from '../core/errors.js'
import type { Metrics } from '../observability/metrics.js'
import type { InjectedCredential } from './call-writes.js'
import { sendRefusal } from './proxy-responses.js'
import type { SystemCredentials } from './system-credentials.js'

export interface CredentialInjectionDeps {
  credentials: SystemCredentials
  metrics: Metrics
}

/** The credential to inject, or the 503 that says it cannot be (nothing is forwarded). */
export type CredentialFor = (
  res: ServerResponse,
  system: SystemRecord,
  extra?: Record<string, unknown>,
  answer?: (def: ErrorDef, error: string, detail: Record<string, unknown>) => void,
) => InjectedCredential | null | false

/** The credential injected into a system's requests, with the forms its answers are searched for. */
export function createCredentialInjection(deps: CredentialInjectionDeps): { credentialFor: CredentialFor } {
  const { metrics } = deps
  const injectedOf = new WeakMap<object, InjectedCredential>()
  /** The credential to inject, or the 503 that says it cannot be (nothing is forwarded). */
  function credentialFor(
    res: ServerResponse,
    system: SystemRecord,
    extra: Record<string, unknown> = {},
    answer?: (def: ErrorDef, error: string, detail: Record<string, unknown>) => void,
  ): InjectedCredential | null | false {
    const resolved = deps.credentials.get(system)
    if (resolved === null) return null
    if (resolved.ok) {
      // Resolved credentials are kept per system version: so are their needles.
      let injected = injectedOf.get(resolved)
      if (!injected) {
        injected = { header: resolved.header, value: resolved.value, needles: echoNeedles(resolved.secret) }
        injectedOf.set(resolved, injected)
      }
      return injected
    }
    metrics.gateEvents.failedClosed({ reason: 'credential_unavailable' })
    const detail = { systemId: system.systemId, ...extra }
    const def = ERRORS.credentialUnavailable
    if (answer) answer(def, def.message, detail)
    else sendRefusal(res, def, def.message, detail)
    return false
  }

  return { credentialFor }
}
