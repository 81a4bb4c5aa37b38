/**
 * Where an execute or an approved action may send its request: the enrolled system's fixed
 * origin (the upstream client's pool is bound to it), plus a path that is checked and never
 * normalised. Anything a server or proxy on the
 * way could read as another host or another path (dot segments, encoded slashes, dots or
 * backslashes, empty segments, control bytes, `;` path parameters, encoded letters or digits)
 * is refused, by the same rules as gate-proxy (systems/safe-path.ts) plus its own, so the path the lease was bound to
 * is exactly the path the upstream routes.
 */

import { ERRORS, fail } from '../core/errors.js'
import { carriesMethodOverride } from '../systems/method-override-query.js'
import { unsafePathProblem } from '../systems/safe-path.js'

export const EXECUTE_PATH_PREFIX = '/v1/'

/** RFC 3986 pchar without `%` (checked separately), plus `/`; and the query adds `?`. */
const PATH_CHARS = /^[A-Za-z0-9\-._~!$&'()*+,;=:@/%]*$/
const QUERY_CHARS = /^[A-Za-z0-9\-._~!$&'()*+,;=:@/?%]*$/

/**
 * A path as a replay sends it: each character the rules below refuse raw (a space, `"`, `<`,
 * `{`, a byte over 0x7f…) percent-encoded, the rest, escapes included, as is. http-proxy-3
 * encodes the same on ALLOW, except `[ ] ^ |` (and in the query `` ` { } ``), which it
 * leaves raw: for those the replay's spelling differs, the decoded path does not.
 * A proxy-staged write is replayed by this path, which the rules below accept where they
 * refuse the raw one (found in review: such a write was staged and could never be approved).
 */
export function withUnsendableEncoded(path: string): string {
  const q = path.indexOf('?')
  let out = ''
  for (let i = 0; i < path.length; i++) {
    const c = path[i] as string
    const inQuery = q !== -1 && i >= q
    // A URL parser encodes `'` in the query of an http(s) URL, and would not read it back.
    if ((inQuery ? QUERY_CHARS : PATH_CHARS).test(c) && !(inQuery && c === "'")) out += c
    else {
      // The request line's bytes arrive as latin1 characters, one per byte.
      const code = c.charCodeAt(0)
      const bytes = code < 0x100 ? [code] : [...Buffer.from(c, 'utf8')]
      for (const b of bytes) out += `%${b.toString(16).toUpperCase().padStart(2, '0')}`
    }
  }
  return out
}

/** Percent-encoded bytes that would change how the path is routed once decoded. */
const UNSAFE_ENCODED = new Set(['2e', '2f', '5c', '25', '7f'])

export const MAX_PATH_LENGTH = 4096

export const METHOD_OVERRIDE_PROBLEM = 'a _method query parameter (a method override)'

export type PathVerdict = { ok: true } | { ok: false; problem: string }

/** In the path every encoded delimiter is refused; in the query (never routed) only control bytes. */
function encodedProblem(part: string, inPath: boolean): string | null {
  for (let i = part.indexOf('%'); i !== -1; i = part.indexOf('%', i + 1)) {
    const hex = part.slice(i + 1, i + 3)
    if (!/^[0-9A-Fa-f]{2}$/.test(hex)) return 'a % that is not followed by two hex digits'
    const lower = hex.toLowerCase()
    if ((inPath && UNSAFE_ENCODED.has(lower)) || lower === '7f' || Number.parseInt(hex, 16) < 0x20)
      return `an encoded %${hex.toUpperCase()} (dot, slash, backslash, percent or a control byte)`
  }
  return null
}

/**
 * Checks an upstream path (with an optional query): it must begin with `prefix` (`/v1/` for
 * POST /v1/execute), use only URL path characters, and hold no dot segment, empty segment
 * (except a trailing slash) or encoded byte that decodes to a delimiter.
 */
export function checkUpstreamPath(path: string, prefix: string = EXECUTE_PATH_PREFIX): PathVerdict {
  const bad = (problem: string): PathVerdict => ({ ok: false, problem })
  if (typeof path !== 'string' || path.length === 0) return bad('the path is empty')
  if (path.length > MAX_PATH_LENGTH) return bad(`the path is longer than ${MAX_PATH_LENGTH} characters`)
  if (!path.startsWith(prefix)) return bad(`the path must begin with ${prefix}`)
  const q = path.indexOf('?')
  const pathPart = q === -1 ? path : path.slice(0, q)
  const query = q === -1 ? null : path.slice(q + 1)
  if (path.includes('\\')) return bad('a backslash')
  if (path.includes('#')) return bad('a fragment (#)')
  if (!PATH_CHARS.test(pathPart)) return bad('a character that is not allowed in a URL path')
  if (query !== null && !QUERY_CHARS.test(query)) return bad('a character that is not allowed in a URL query')
  const segments = pathPart.split('/').slice(1)
  for (let i = 0; i < segments.length; i++) {
    const seg = segments[i] as string
    if (seg === '.' || seg === '..') return bad('a dot segment (. or ..)')
    if (seg === '' && i !== segments.length - 1) return bad('an empty segment (//)')
  }
  const encoded = encodedProblem(pathPart, true) ?? (query === null ? null : encodedProblem(query, false))
  if (encoded) return bad(encoded)
  // And whatever gate-proxy refuses (`;` path parameters, as in `..;/`, and percent-encoded
  // letters or digits): a path one transport gates under one verb, the other must not let
  // through under another.
  const proxyProblem = unsafePathProblem(path)
  if (proxyProblem) return bad(proxyProblem)
  // Nor a method other than the one the lease or approval names (found in review).
  if (carriesMethodOverride(path)) return bad(METHOD_OVERRIDE_PROBLEM)
  // Last guard: a URL parser must read back the very same path on some origin.
  const url = new URL(`http://upstream.invalid${path}`)
  if (url.host !== 'upstream.invalid' || `${url.pathname}${url.search}` !== path)
    return bad('it does not survive URL parsing unchanged')
  return { ok: true }
}

/** The API's answer to a refused path: a method override is its own error, as on gate-proxy. */
export function failUnsafePath(problem: string): never {
  if (problem === METHOD_OVERRIDE_PROBLEM) fail(ERRORS.methodOverride)
  fail(ERRORS.unsafePath, { problem })
}

export type FilledPath = { ok: true; path: string; used: Set<string> } | { ok: false; problem: string }

/**
 * Fills `{name}` placeholders from params, each value URL-encoded as exactly one segment.
 * Values must be strings or numbers; one that could not stand as a segment on its own
 * (empty, `.`, `..`, or holding `/`, `\` or `%`) is refused rather than escaped twice.
 */
export function fillPathTemplate(template: string, params: Record<string, unknown>): FilledPath {
  const used = new Set<string>()
  let problem: string | null = null
  const path = template.replace(/\{([A-Za-z0-9_.-]+)\}/g, (_m, name: string) => {
    const v = params[name]
    used.add(name)
    if (typeof v !== 'string' && !(typeof v === 'number' && Number.isFinite(v))) {
      problem ??= `path parameter ${name} must be a string or a number`
      return ''
    }
    const s = String(v)
    if (s === '' || s === '.' || s === '..' || /[/\\%]/.test(s)) {
      problem ??= `path parameter ${name} cannot be used as a path segment`
      return ''
    }
    return encodeURIComponent(s)
  })
  if (problem) return { ok: false, problem }
  return { ok: true, path, used }
}
