/**
 * The pod annotations that ask for a gate-proxy, and what they mean. A pod that asks for
 * injection with a value the injector cannot read is refused rather than started ungated.
 */

export const ANNOTATIONS = {
  /** `"true"` injects the proxy; `"false"` or absent leaves the pod alone. */
  inject: 'writegate.io/inject',
  /** Deprecated: a ConfigMap holding a systems file for the proxy (it serves its tenant's enrolled systems without one). */
  routes: 'writegate.io/routes',
  /** Secret with the proxy's agent-scoped API key (`api-key`) and its Redis URL (`redis-url`). */
  apiKeySecret: 'writegate.io/api-key-secret',
  /** Comma-separated Secrets holding upstream credentials, given to the proxy only. */
  credentialSecrets: 'writegate.io/credential-secrets',
  /** Comma-separated variables of those Secrets that systems' `credential.fromEnv` may name. */
  credentialEnv: 'writegate.io/credential-env',
  /** `ENV_NAME=sys_id,...`: agent variables pointed at each system through the proxy. */
  baseUrlEnv: 'writegate.io/base-url-env',
  /** `"true"` adds an init container whose iptables rules send all outbound TCP to the proxy. */
  enforce: 'writegate.io/enforce',
  /**
   * Secret with the tenant's interception CA (`ca.crt`, `ca.key`, from `writegate ca init`): the
   * proxy gets both and intercepts HTTPS to enrolled hosts; agents get the certificate alone.
   */
  tlsCaSecret: 'writegate.io/tls-ca-secret',
  /**
   * Comma-separated hosts (`host` or `host:port`) the proxy lets through opaque and ungated: a
   * CONNECT to them, and on the TLS port a connection whose SNI names them (`proxy.passthrough`).
   */
  passthrough: 'writegate.io/passthrough',
} as const

/** Label the injector puts on pods it has injected (the PodMonitor selects on it). */
export const INJECTED_LABEL = 'writegate.io/proxy'
export const INJECTED_LABEL_VALUE = 'injected'

export interface BaseUrlBinding {
  env: string
  systemId: string
}

export interface InjectionRequest {
  /** Null: no routes file (the proxy serves its tenant's enrolled systems). */
  routesConfigMap: string | null
  proxySecret: string
  credentialSecrets: string[]
  /** Variables the proxy may inject (`credentials.allowEnv`). */
  credentialEnv: string[]
  baseUrls: BaseUrlBinding[]
  enforce: boolean
  /** The interception CA's Secret; null: no HTTPS interception for this pod. */
  tlsCaSecret: string | null
  /** Hosts the proxy tunnels opaque and ungated (`proxy.passthrough`). */
  passthrough: string[]
}

export type AnnotationReading =
  | { kind: 'not-requested' }
  | { kind: 'requested'; request: InjectionRequest }
  | { kind: 'invalid'; message: string }

const OBJECT_NAME = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/
const ENV_NAME = /^[A-Z_][A-Z0-9_]*$/
const SYSTEM_ID = /^sys_[A-Za-z0-9_-]{1,60}$/
/** Variables the injector sets itself; a base-URL binding may not take them over. */
export const PROXY_ENV_NAMES = ['HTTP_PROXY', 'http_proxy', 'NO_PROXY', 'no_proxy'] as const

class AnnotationError extends Error {}

function flag(annotations: Record<string, string>, name: string): boolean | undefined {
  const raw = annotations[name]
  if (raw === undefined) return undefined
  const v = raw.trim().toLowerCase()
  if (v === 'true') return true
  if (v === 'false') return false
  throw new AnnotationError(`annotation ${name} must be "true" or "false", got ${JSON.stringify(raw)}`)
}

function objectName<F extends string | null>(
  annotations: Record<string, string>,
  name: string,
  fallback: F,
): string | F {
  const raw = annotations[name]
  if (raw === undefined) return fallback
  const v = raw.trim()
  if (v.length > 253 || !OBJECT_NAME.test(v))
    throw new AnnotationError(`annotation ${name} must name a Kubernetes object, got ${JSON.stringify(raw)}`)
  return v
}

function list(raw: string | undefined): string[] {
  if (raw === undefined) return []
  return raw
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '')
}

function credentialSecrets(annotations: Record<string, string>): string[] {
  const names = list(annotations[ANNOTATIONS.credentialSecrets])
  const seen = new Set<string>()
  for (const n of names) {
    if (n.length > 253 || !OBJECT_NAME.test(n))
      throw new AnnotationError(
        `annotation ${ANNOTATIONS.credentialSecrets}: ${JSON.stringify(n)} is not a Secret name`,
      )
    if (seen.has(n))
      throw new AnnotationError(`annotation ${ANNOTATIONS.credentialSecrets}: ${n} is listed twice`)
    seen.add(n)
  }
  return names
}

function credentialEnv(annotations: Record<string, string>): string[] {
  const name = ANNOTATIONS.credentialEnv
  const names = list(annotations[name])
  for (const n of names) {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(n))
      throw new AnnotationError(
        `annotation ${name}: ${JSON.stringify(n)} is not an environment variable name`,
      )
    // writegate's own settings are never injectable (the proxy's Redis URL among them).
    if (n.startsWith('WRITEGATE_') && !n.startsWith('WRITEGATE_CREDENTIAL_'))
      throw new AnnotationError(`annotation ${name}: ${n} is a writegate setting, not a credential`)
  }
  return [...new Set(names)]
}

function baseUrls(annotations: Record<string, string>): BaseUrlBinding[] {
  const name = ANNOTATIONS.baseUrlEnv
  const out: BaseUrlBinding[] = []
  const seen = new Set<string>()
  for (const entry of list(annotations[name])) {
    const [env, systemId, ...rest] = entry.split('=').map((s) => s.trim())
    if (!env || !systemId || rest.length > 0)
      throw new AnnotationError(`annotation ${name}: expected ENV_NAME=sys_id, got ${JSON.stringify(entry)}`)
    if (!ENV_NAME.test(env))
      throw new AnnotationError(
        `annotation ${name}: ${JSON.stringify(env)} is not an environment variable name`,
      )
    if (!SYSTEM_ID.test(systemId))
      throw new AnnotationError(`annotation ${name}: ${JSON.stringify(systemId)} is not a system id (sys_…)`)
    if ((PROXY_ENV_NAMES as readonly string[]).includes(env))
      throw new AnnotationError(`annotation ${name}: ${env} is set by the injector itself`)
    if (seen.has(env)) throw new AnnotationError(`annotation ${name}: ${env} is bound twice`)
    seen.add(env)
    out.push({ env, systemId })
  }
  return out
}

/** As `proxy.passthrough` accepts them: a host name, or host:port. */
const PASSTHROUGH_HOST = /^[A-Za-z0-9.-]+(:\d{1,5})?$/

function passthrough(annotations: Record<string, string>): string[] {
  const name = ANNOTATIONS.passthrough
  const hosts = list(annotations[name])
  for (const h of hosts)
    if (h.length > 260 || !PASSTHROUGH_HOST.test(h))
      throw new AnnotationError(`annotation ${name}: ${JSON.stringify(h)} is not a host or host:port`)
  return [...new Set(hosts.map((h) => h.toLowerCase()))]
}

export interface AnnotationDefaults {
  /** Deprecated: a routes ConfigMap for pods that do not name one; null for none. */
  routesConfigMap: string | null
  proxySecret: string
  /** The interception CA's Secret for pods that do not name one; null for none. */
  tlsCaSecret: string | null
}

/** Reads a pod's writegate annotations. Pure: no defaults beyond the ones handed in. */
export function readInjectionAnnotations(
  annotations: Record<string, string> | undefined,
  defaults: AnnotationDefaults,
): AnnotationReading {
  const a = annotations ?? {}
  try {
    if (flag(a, ANNOTATIONS.inject) !== true) {
      // Enforcement without a proxy would be a pod that believes itself gated and is not.
      if (flag(a, ANNOTATIONS.enforce) === true)
        throw new AnnotationError(
          `annotation ${ANNOTATIONS.enforce}: "true" needs ${ANNOTATIONS.inject}: "true" as well (there is no enforcement without the proxy)`,
        )
      return { kind: 'not-requested' }
    }
    return {
      kind: 'requested',
      request: {
        routesConfigMap: objectName(a, ANNOTATIONS.routes, defaults.routesConfigMap),
        proxySecret: objectName(a, ANNOTATIONS.apiKeySecret, defaults.proxySecret),
        credentialSecrets: credentialSecrets(a),
        credentialEnv: credentialEnv(a),
        baseUrls: baseUrls(a),
        enforce: flag(a, ANNOTATIONS.enforce) ?? false,
        tlsCaSecret: objectName(a, ANNOTATIONS.tlsCaSecret, defaults.tlsCaSecret),
        passthrough: passthrough(a),
      },
    }
  } catch (err) {
    if (err instanceof AnnotationError) return { kind: 'invalid', message: err.message }
    throw err
  }
}
