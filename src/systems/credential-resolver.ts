import { closeSync, constants, fstatSync, openSync, readlinkSync, readSync, realpathSync } from 'node:fs'
import { resolve, sep } from 'node:path'
import type { SystemsFile } from '../config/systems.js'
import type { CredentialRef } from './system-definition.js'

/**
 * Turns a system's credential reference into the header value a process injects. The
 * reference comes from a tenant admin (through the API), so it may only name a secret the
 * operator of this process set aside for that: otherwise an admin could point a system at
 * its own upstream and have writegate send it the database URL, the Redis password or
 * another tenant's token. The allowance is per process (`credentials.allowEnv`,
 * `credentials.allowFiles`), optionally per tenant (`ten_…:NAME`); references in the
 * operator's own systems or routes file are allowed as written, for the tenant they enrol and
 * the upstream they are sent to there (its origin, and the CA bundle it is verified against),
 * in the header and with the prefix the file names: a tenant admin who may use the operator's GitHub token through
 * the gate may not enrol a system that sends it to a server of its own, nor trust a CA of its
 * own for GitHub's name.
 */
/** `value` is what goes in the header (the prefix and the secret); `secret` alone is what an answer must not carry back. */
export interface Injection {
  header: string
  value: string
  secret: string
}
export type ResolvedCredential = ({ ok: true } & Injection) | { ok: false; problem: string }

export interface CredentialResolver {
  /** `to`: where the secret is sent (a reference in the operator's files holds only for its own). */
  resolve(tenantId: string, ref: CredentialRef, to: Destination): ResolvedCredential
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

/** Whether a path lies below an allowed directory, the directory's links resolved. */
function startsWithReal(path: string, dir: string): boolean {
  const real = realDir(dir)
  return real !== null && path.startsWith(real)
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

/** A directory as written, made absolute without touching the file system. */
const asWritten = (dir: string) => {
  const d = resolve(dir)
  return d.endsWith(sep) ? d : d + sep
}

/** A secret is a token, not a document: a larger file is refused unread. */
export const MAX_SECRET_FILE_BYTES = 64 * 1024

/**
 * The secret in a file already judged allowed: opened without following a last link and without
 * blocking (a FIFO would hang the process), a regular file of at most MAX_SECRET_FILE_BYTES, and
 * the file opened is judged again (`stillAllowed`, by /proc/self/fd on Linux): a directory on the
 * way swapped for a link between the check and the open would otherwise be followed.
 */
export function readSecretFile(
  real: string,
  stillAllowed: (opened: string) => boolean,
): { ok: true; value: string } | { ok: false; reason: string } {
  let fd: number
  try {
    fd = openSync(real, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK)
  } catch (err) {
    return { ok: false, reason: (err as NodeJS.ErrnoException).code ?? 'error' }
  }
  try {
    const st = fstatSync(fd)
    if (!st.isFile()) return { ok: false, reason: 'not a regular file' }
    let opened: string | null = null
    try {
      opened = readlinkSync(`/proc/self/fd/${fd}`)
    } catch {} // no /proc (not Linux): the check before the open stands alone
    if (opened !== null && !stillAllowed(opened)) return { ok: false, reason: 'moved out of its directory' }
    const buf = Buffer.alloc(MAX_SECRET_FILE_BYTES + 1)
    const n = readSync(fd, buf, 0, buf.length, 0)
    if (n > MAX_SECRET_FILE_BYTES) return { ok: false, reason: `larger than ${MAX_SECRET_FILE_BYTES} bytes` }
    return { ok: true, value: buf.subarray(0, n).toString('utf8').trim() }
  } catch (err) {
    return { ok: false, reason: (err as NodeJS.ErrnoException).code ?? 'error' }
  } finally {
    closeSync(fd)
  }
}

/**
 * A header value Node will send as is: tab, printable ASCII and the rest of Latin-1. Node
 * refuses a line break or another control character, and any character above U+00FF (`…`,
 * U+2026, a placeholder a reader may paste as the secret).
 */
const HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/

/**
 * A reference the operator wrote into this process's own systems or routes file, for the tenant
 * the file enrols that system for: allowed as written for that tenant only, sent where the file
 * sends it (`to`) in the header and with the prefix it names. `null` is the tenant
 * a routes file is bound to (`unboundTenant`), or, in a process that serves one tenant (a
 * standalone proxy), that tenant.
 */
export interface OperatorRef {
  tenantId: string | null
  ref: CredentialRef
  /** Where the operator's file sends it. */
  to: Destination
}

/** Where a credential goes: the upstream, and the CA bundle its certificate is verified against (none: the system trust store). */
export interface Destination {
  upstream: string
  caBundle?: string | null | undefined
}

/** The same place to send a secret to: one origin, one trust anchor. */
function sameDestination(a: Destination, b: Destination): boolean {
  const origin = originOf(a.upstream)
  return origin !== null && origin === originOf(b.upstream) && (a.caBundle || null) === (b.caBundle || null)
}

/** An upstream's origin (scheme, host, port), or null for one that does not parse. */
function originOf(url: string): string | null {
  try {
    return new URL(url).origin
  } catch {
    return null
  }
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
  const operatorAllows = (
    tenantId: string,
    ref: CredentialRef,
    to: Destination,
    names: (ref: CredentialRef) => boolean,
  ) =>
    operatorRefs.some(
      (o) =>
        names(o.ref) &&
        sameDestination(o.to, to) &&
        o.ref.header.toLowerCase() === ref.header.toLowerCase() &&
        o.ref.prefix === ref.prefix &&
        (o.tenantId === tenantId ||
          (o.tenantId === null && (deps.unboundTenant === undefined || deps.unboundTenant() === tenantId))),
    )

  function secret(
    tenantId: string,
    ref: CredentialRef,
    to: Destination,
  ): { ok: true; value: string } | { ok: false; problem: string } {
    if (ref.fromEnv !== undefined) {
      const name = ref.fromEnv
      if (
        !operatorAllows(tenantId, ref, to, (r) => r.fromEnv === name) &&
        !envAllowed(envEntries, tenantId, name)
      )
        return {
          ok: false,
          problem: `environment variable ${name} is not allowed by credentials.allowEnv (WRITEGATE_CREDENTIALS_ALLOW_ENV)`,
        }
      const v = deps.env[name]
      // Empty or blank would go out as the prefix alone: no credential, sent as one.
      if (v === undefined || v.trim() === '')
        return { ok: false, problem: `environment variable ${name} is not set or blank` }
      // Trimmed, as a file's is: an upstream reads a header without the spaces or tabs at its
      // ends, so an untrimmed secret (`--from-literal="tok "`) was echoed back past the guard,
      // which searched answers for the spaced form (found in review).
      return { ok: true, value: v.trim() }
    }
    const file = ref.fromFile as string
    const operator = operatorAllows(tenantId, ref, to, (r) => r.fromFile === file)
    const mine = fileEntries.filter((e) => forTenant(e, tenantId))
    const notAllowed = {
      ok: false as const,
      problem: `file ${file} is not below a directory of credentials.allowFiles (WRITEGATE_CREDENTIALS_ALLOW_FILES)`,
    }
    // First by the path as written, touching nothing: whether a file outside the allowed
    // directories exists is no business of a tenant admin's (the problem reaches receipts).
    const written = resolve(file)
    if (
      !operator &&
      !mine.some((e) => written.startsWith(asWritten(e.value)) || startsWithReal(written, e.value))
    )
      return notAllowed
    let real: string
    try {
      real = realpathSync(file)
    } catch (err) {
      return { ok: false, problem: `cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? 'error'})` }
    }
    const allowedReal = (path: string) => operator || mine.some((e) => startsWithReal(path, e.value))
    if (!allowedReal(real)) return notAllowed
    const read = readSecretFile(real, allowedReal)
    if (!read.ok) return { ok: false, problem: `cannot read ${file} (${read.reason})` }
    if (read.value === '') return { ok: false, problem: `file ${file} is empty` }
    return read
  }

  return {
    resolve(tenantId, ref, to) {
      const s = secret(tenantId, ref, to)
      if (!s.ok) return s
      const value = ref.prefix + s.value
      if (!HEADER_VALUE.test(value))
        return {
          ok: false,
          problem:
            'the secret holds a character a header cannot carry: a control character or one outside Latin-1',
        }
      return { ok: true, header: ref.header.toLowerCase(), value, secret: s.value }
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
          s.credential
            ? [
                {
                  tenantId: s.tenantId ?? null,
                  ref: s.credential,
                  to: { upstream: s.upstream, caBundle: s.caBundle },
                },
              ]
            : [],
        ) ?? [],
    ),
    ...(unboundTenant ? { unboundTenant } : {}),
  })
}
