import { readFileSync, realpathSync } from 'node:fs'
import { sep } from 'node:path'
import type { SystemsFile } from '../config/systems.js'
import type { CredentialRef } from './system-definition.js'

/**
 * Turns a system's credential reference into the header value a process injects. The
 * reference comes from a tenant admin (through the API), so it may only name a secret the
 * operator of this process set aside for that: otherwise an admin could point a system at
 * its own upstream and have writegate send it the database URL, the Redis password or
 * another tenant's token. The allowance is per process (`credentials.allowEnv`,
 * `credentials.allowFiles`), optionally per tenant (`ten_…:NAME`); references in the
 * operator's own systems or routes file are allowed as written, for the tenant they enrol.
 */
export type ResolvedCredential = { ok: true; header: string; value: string } | { ok: false; problem: string }

export interface CredentialResolver {
  resolve(tenantId: string, ref: CredentialRef): ResolvedCredential
}

export interface CredentialAllowance {
  /** `NAME`, `PREFIX*`, or either after `ten_…:` to allow it for one tenant only. */
  env: readonly string[]
  /** Directories (a file below one, after symlinks are resolved), optionally after `ten_…:`. */
  files: readonly string[]
}

interface Entry {
  tenantId: string | null
  value: string
}

function parseEntry(raw: string): Entry {
  const m = /^(ten_[A-Za-z0-9]+):(.+)$/.exec(raw)
  return m ? { tenantId: m[1] as string, value: m[2] as string } : { tenantId: null, value: raw }
}

const forTenant = (e: Entry, tenantId: string) => e.tenantId === null || e.tenantId === tenantId

function envAllowed(entries: readonly Entry[], tenantId: string, name: string): boolean {
  return entries.some(
    (e) =>
      forTenant(e, tenantId) &&
      (e.value.endsWith('*') ? name.startsWith(e.value.slice(0, -1)) : e.value === name),
  )
}

/** The directory itself, resolved once; a missing one allows nothing. */
function realDir(dir: string): string | null {
  try {
    const real = realpathSync(dir)
    return real.endsWith(sep) ? real : real + sep
  } catch {
    return null
  }
}

/** A header value Node will send as is: no line breaks or other control characters. */
const HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/

/**
 * A reference the operator wrote into this process's own systems or routes file, for the tenant
 * the file enrols that system for: allowed as written for that tenant only. `null` is the tenant
 * a routes file is bound to (`unboundTenant`), or, in a process that serves one tenant (a
 * standalone proxy), that tenant.
 */
export interface OperatorRef {
  tenantId: string | null
  ref: CredentialRef
}

export function createCredentialResolver(deps: {
  env: NodeJS.ProcessEnv
  allow: CredentialAllowance
  operatorRefs?: readonly OperatorRef[]
  /**
   * The tenant the references without one belong to, once known (the control plane's embedded
   * routes file: the proxy key's tenant); null allows them for no tenant yet. Left out in a
   * process that serves one tenant only.
   */
  unboundTenant?: () => string | null
}): CredentialResolver {
  const envEntries = deps.allow.env.map(parseEntry)
  const fileEntries = deps.allow.files.map(parseEntry)
  const operatorRefs = deps.operatorRefs ?? []
  // Another tenant's operator reference is no allowance: an admin could otherwise enrol a system
  // of its own that names it, and have writegate send that tenant's secret to its upstream.
  const operatorAllows = (tenantId: string, names: (ref: CredentialRef) => boolean) =>
    operatorRefs.some(
      (o) =>
        names(o.ref) &&
        (o.tenantId === tenantId ||
          (o.tenantId === null && (deps.unboundTenant === undefined || deps.unboundTenant() === tenantId))),
    )

  function secret(
    tenantId: string,
    ref: CredentialRef,
  ): { ok: true; value: string } | { ok: false; problem: string } {
    if (ref.fromEnv !== undefined) {
      const name = ref.fromEnv
      if (!operatorAllows(tenantId, (r) => r.fromEnv === name) && !envAllowed(envEntries, tenantId, name))
        return {
          ok: false,
          problem: `environment variable ${name} is not allowed by credentials.allowEnv (WRITEGATE_CREDENTIALS_ALLOW_ENV)`,
        }
      const v = deps.env[name]
      if (v === undefined || v === '')
        return { ok: false, problem: `environment variable ${name} is not set` }
      return { ok: true, value: v }
    }
    const file = ref.fromFile as string
    let real: string
    try {
      real = realpathSync(file)
    } catch (err) {
      return { ok: false, problem: `cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? 'error'})` }
    }
    const allowed =
      operatorAllows(tenantId, (r) => r.fromFile === file) ||
      fileEntries.some((e) => {
        if (!forTenant(e, tenantId)) return false
        const dir = realDir(e.value)
        return dir !== null && real.startsWith(dir)
      })
    if (!allowed)
      return {
        ok: false,
        problem: `file ${file} is not below a directory of credentials.allowFiles (WRITEGATE_CREDENTIALS_ALLOW_FILES)`,
      }
    try {
      return { ok: true, value: readFileSync(real, 'utf8').trim() }
    } catch (err) {
      return { ok: false, problem: `cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? 'error'})` }
    }
  }

  return {
    resolve(tenantId, ref) {
      const s = secret(tenantId, ref)
      if (!s.ok) return s
      const value = ref.prefix + s.value
      if (!HEADER_VALUE.test(value))
        return { ok: false, problem: 'the secret holds a line break or another control character' }
      return { ok: true, header: ref.header.toLowerCase(), value }
    },
  }
}

/**
 * A process's resolver, from its `credentials` settings and the references in its own files,
 * each for the tenant its entry names (or `unboundTenant`'s, for an entry that names none).
 */
export function credentialResolverFor(
  settings: { allowEnv: readonly string[]; allowFiles: readonly string[] },
  env: NodeJS.ProcessEnv,
  files: (SystemsFile | null)[],
  unboundTenant?: () => string | null,
): CredentialResolver {
  return createCredentialResolver({
    env,
    allow: { env: settings.allowEnv, files: settings.allowFiles },
    operatorRefs: files.flatMap(
      (f) =>
        f?.systems.flatMap((s) =>
          s.credential ? [{ tenantId: s.tenantId ?? null, ref: s.credential }] : [],
        ) ?? [],
    ),
    ...(unboundTenant ? { unboundTenant } : {}),
  })
}
