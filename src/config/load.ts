import { existsSync, readFileSync } from 'node:fs'
import { parse as parseYaml } from 'yaml'
import type { z } from 'zod'
import { type Settings, settingsSchema } from './schema.js'

/** A setting that stops start-up. Its message is one line naming the setting and the problem. */
export class ConfigError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'ConfigError'
  }
}

export const DEFAULT_CONFIG_PATH = 'config/writegate.yaml'

/** A variable that is set must say something; to take the file's value or the default, unset it. */
export const SET_BUT_EMPTY =
  'the variable is set but empty (unset it to use the settings file or the default)'

/** Environment variable → settings path (contract §10, plus the ones this project adds). */
export const ENV_OVERRIDES: Record<string, { path: string[]; list?: boolean }> = {
  WRITEGATE_PORT: { path: ['server', 'port'] },
  WRITEGATE_HOST: { path: ['server', 'host'] },
  WRITEGATE_PUBLIC_URL: { path: ['server', 'publicUrl'] },
  WRITEGATE_TRUST_PROXY: { path: ['server', 'trustProxy'], list: true },
  WRITEGATE_PROXY_PORT: { path: ['proxy', 'port'] },
  WRITEGATE_PROXY_HOST: { path: ['proxy', 'host'] },
  WRITEGATE_ROUTES_FILE: { path: ['proxy', 'routesFile'] },
  WRITEGATE_PROXY_API_KEY_FILE: { path: ['proxy', 'apiKeyFile'] },
  WRITEGATE_PROXY_ENVIRONMENT: { path: ['proxy', 'environment'] },
  WRITEGATE_METRICS_PORT: { path: ['metrics', 'port'] },
  WRITEGATE_METRICS_HOST: { path: ['metrics', 'host'] },
  WRITEGATE_DATABASE_URL: { path: ['database', 'url'] },
  WRITEGATE_DATA_DIR: { path: ['dataDir'] },
  WRITEGATE_REDIS_URL: { path: ['redis', 'url'] },
  WRITEGATE_REDIS_MODE: { path: ['redis', 'mode'] },
  WRITEGATE_LOG_LEVEL: { path: ['log', 'level'] },
  WRITEGATE_MASTER_KEY_FILE: { path: ['secrets', 'masterKeyFile'] },
  WRITEGATE_SYSTEMS_FILE: { path: ['systemsFile'] },
  WRITEGATE_INJECTOR_HOST: { path: ['injector', 'host'] },
  WRITEGATE_INJECTOR_PORT: { path: ['injector', 'port'] },
  WRITEGATE_INJECTOR_TLS_CERT_FILE: { path: ['injector', 'tls', 'certFile'] },
  WRITEGATE_INJECTOR_TLS_KEY_FILE: { path: ['injector', 'tls', 'keyFile'] },
  WRITEGATE_INJECTOR_PROXY_IMAGE: { path: ['injector', 'proxy', 'image'] },
  WRITEGATE_INJECTOR_PROXY_IMAGE_PULL_POLICY: { path: ['injector', 'proxy', 'imagePullPolicy'] },
  WRITEGATE_INJECTOR_ROUTES_CONFIGMAP: { path: ['injector', 'defaults', 'routesConfigMap'] },
  WRITEGATE_INJECTOR_TLS_CA_SECRET: { path: ['injector', 'defaults', 'tlsCaSecret'] },
  WRITEGATE_INJECTOR_PROXY_SECRET: { path: ['injector', 'defaults', 'proxySecret'] },
  WRITEGATE_INJECTOR_ENFORCE_IMAGE: { path: ['injector', 'enforce', 'image'] },
  WRITEGATE_AUDIT_SIGNING_KEY_FILE: { path: ['audit', 'signingKeyFile'] },
  WRITEGATE_AUDIT_CHECKPOINT_INTERVAL_SECONDS: { path: ['audit', 'checkpointIntervalSeconds'] },
  WRITEGATE_SCANNER_PUBLIC_KEY_FILE: { path: ['manifests', 'scannerPublicKeyFile'] },
  WRITEGATE_PROXY_PASSTHROUGH: { path: ['proxy', 'passthrough'], list: true },
  WRITEGATE_PROXY_TLS_CA_CERT_FILE: { path: ['proxy', 'tls', 'caCertFile'] },
  WRITEGATE_PROXY_TLS_CA_KEY_FILE: { path: ['proxy', 'tls', 'caKeyFile'] },
  WRITEGATE_PROXY_TLS_PORT: { path: ['proxy', 'tls', 'port'] },
  WRITEGATE_CREDENTIALS_ALLOW_ENV: { path: ['credentials', 'allowEnv'], list: true },
  WRITEGATE_CREDENTIALS_ALLOW_FILES: { path: ['credentials', 'allowFiles'], list: true },
}

function setPath(target: Record<string, unknown>, path: string[], value: unknown): void {
  let node = target
  for (const key of path.slice(0, -1)) {
    const next = node[key]
    if (next === undefined || next === null) node[key] = {}
    else if (typeof next !== 'object' || Array.isArray(next)) {
      throw new ConfigError(
        `invalid setting ${describeSetting(path)}: ${key} is not a mapping in the config file`,
      )
    }
    node = node[key] as Record<string, unknown>
  }
  node[path.at(-1) as string] = value
}

/** The variable that sets a setting; an element of a list setting (`server.trustProxy.0`) is set by the list's. */
function envNameFor(path: (string | number | symbol)[]): string | undefined {
  const joined = path.map(String).join('.')
  const element = typeof path.at(-1) === 'number' ? path.slice(0, -1).map(String).join('.') : null
  return Object.entries(ENV_OVERRIDES).find(
    ([, o]) => o.path.join('.') === joined || (o.list === true && o.path.join('.') === element),
  )?.[0]
}

/** A setting as messages name it: `server.port (WRITEGATE_PORT)`, or just the path when no variable sets it. */
export function describeSetting(path: readonly (string | number | symbol)[]): string {
  const env = envNameFor([...path])
  return `${path.map(String).join('.')}${env ? ` (${env})` : ''}`
}

function describeIssue(issue: z.core.$ZodIssue, raw: Record<string, unknown>): string {
  const where = issue.path.length > 0 ? issue.path.map(String).join('.') : '(root)'
  const env = envNameFor(issue.path)
  let got: unknown = raw
  for (const p of issue.path)
    got = got && typeof got === 'object' ? (got as Record<PropertyKey, unknown>)[p] : undefined
  // Echo the bad value back, unless it may hold a credential: a setting named for one, a whole
  // section given as one value (`database: postgres://user:password@…`), or a value that looks
  // like a URL, carries an `@` or a writegate credential's prefix, wherever it was put.
  const sensitive =
    /url|key|secret|password|token/i.test(where) ||
    (issue.code === 'invalid_type' && (issue.expected === 'object' || issue.expected === 'array')) ||
    (typeof got === 'string' && /:\/\/|@|^(svc|wg[a-z]?)_/i.test(got))
  const echo =
    got !== undefined && !sensitive && issue.code !== 'unrecognized_keys' && typeof got !== 'object'
  const shown = echo ? `, got ${JSON.stringify(got)}` : ''
  const msg =
    issue.code === 'unrecognized_keys' ? `unknown setting(s) ${issue.keys.join(', ')}` : issue.message
  return `invalid setting ${where}${env ? ` (${env})` : ''}: ${msg}${shown}`
}

/** Validates a raw settings object; throws ConfigError naming the first bad setting. */
export function parseSettings(raw: Record<string, unknown>): Settings {
  const result = settingsSchema.safeParse(raw)
  if (!result.success) {
    const first = result.error.issues[0]
    throw new ConfigError(first ? describeIssue(first, raw) : 'invalid settings')
  }
  return result.data
}

/**
 * Kubernetes gives every pod, for each Service in its namespace, Docker-link variables named
 * after it: a Service `writegate` sets `WRITEGATE_PORT=tcp://10.96.0.12:8080`, one named
 * `writegate-injector` sets `WRITEGATE_INJECTOR_PORT`, so `helm install writegate` alone would
 * stop its own pods (and any gate-proxy sidecar in that namespace) at start. No port setting
 * takes that shape, so such a value is the cluster's, not the operator's: it is left out (and
 * logged, `serviceLinkVariables`). The chart also turns service links off for its own pods.
 */
const SERVICE_LINK = /^(tcp|udp|sctp):\/\/(\[[0-9a-f:.]+\]|[0-9.]+):[0-9]+$/i

function isServiceLink(name: string, value: string): boolean {
  return name.endsWith('_PORT') && SERVICE_LINK.test(value)
}

/**
 * writegate's variables read outside the settings: the proxy's key, the CLI's server and key,
 * and the image's health check (Dockerfile).
 */
const OTHER_VARIABLES = new Set([
  'WRITEGATE_HEALTH_URL',
  'WRITEGATE_HEALTH_PORT',
  'WRITEGATE_CONFIG',
  'WRITEGATE_PROXY_API_KEY',
  'WRITEGATE_URL',
  'WRITEGATE_API_KEY',
])

/** The names Kubernetes gives a Service's links (`writegate-x`: `WRITEGATE_X_SERVICE_HOST`, `WRITEGATE_X_PORT_443_TCP_ADDR`, …). */
const SERVICE_LINK_NAME =
  /_(SERVICE_HOST|SERVICE_PORT(_[A-Z0-9_]+)?|PORT(_[0-9]+_(TCP|UDP|SCTP)(_(PROTO|PORT|ADDR))?)?)$/

/**
 * `WRITEGATE_` variables that no setting reads: a typo (`WRITEGATE_INJECTOR_TLS_CA_SECRT`) would
 * otherwise leave its setting at the default without a word. Service links, secrets to inject
 * (`WRITEGATE_CREDENTIAL_`) and the test suite's own (`WRITEGATE_TEST_`) are not counted.
 */
export function unknownVariables(env: NodeJS.ProcessEnv = process.env): string[] {
  return Object.keys(env)
    .filter(
      (name) =>
        name.startsWith('WRITEGATE_') &&
        !(name in ENV_OVERRIDES) &&
        !OTHER_VARIABLES.has(name) &&
        !name.startsWith('WRITEGATE_TEST_') &&
        // Secrets to inject may be named so (credentials.allowEnv).
        !name.startsWith('WRITEGATE_CREDENTIAL_') &&
        !SERVICE_LINK_NAME.test(name),
    )
    .sort()
}

/** The port variables that hold a Kubernetes service link, and were left out of the settings. */
export function serviceLinkVariables(env: NodeJS.ProcessEnv = process.env): string[] {
  return Object.keys(ENV_OVERRIDES).filter((name) => {
    const value = env[name]
    return value !== undefined && isServiceLink(name, value)
  })
}

/**
 * Settings = the YAML file (WRITEGATE_CONFIG, default config/writegate.yaml) with
 * environment overrides on top, validated once. A missing default file means "all
 * defaults"; a missing file that was asked for by name is an error.
 */
export function loadSettings(env: NodeJS.ProcessEnv = process.env): Settings {
  const explicit = env.WRITEGATE_CONFIG
  if (explicit !== undefined && explicit.trim() === '')
    throw new ConfigError(`invalid setting WRITEGATE_CONFIG: ${SET_BUT_EMPTY}`)
  const file = explicit ?? DEFAULT_CONFIG_PATH
  let raw: Record<string, unknown> = {}
  if (existsSync(file)) {
    let parsed: unknown
    try {
      parsed = parseYaml(readFileSync(file, 'utf8'))
    } catch (err) {
      const line = (err as Error).message.split('\n')[0]
      throw new ConfigError(`invalid config file ${file} (WRITEGATE_CONFIG): ${line}`)
    }
    if (parsed !== null && parsed !== undefined) {
      if (typeof parsed !== 'object' || Array.isArray(parsed)) {
        throw new ConfigError(
          `invalid config file ${file} (WRITEGATE_CONFIG): expected a mapping at the top level`,
        )
      }
      raw = parsed as Record<string, unknown>
    }
  } else if (explicit) {
    throw new ConfigError(`invalid setting WRITEGATE_CONFIG: file ${explicit} does not exist`)
  }
  for (const [name, o] of Object.entries(ENV_OVERRIDES)) {
    const value = env[name]
    if (value === undefined || isServiceLink(name, value)) continue
    const list = o.list
      ? value
          .split(',')
          .map((s) => s.trim())
          .filter(Boolean)
      : null
    // `WRITEGATE_PORT=` must not quietly mean the default: the operator set it to something.
    if (value.trim() === '' || list?.length === 0)
      throw new ConfigError(`invalid setting ${describeSetting(o.path)}: ${SET_BUT_EMPTY}`)
    setPath(raw, o.path, list ?? value)
  }
  return parseSettings(raw)
}
