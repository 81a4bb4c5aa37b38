import { decodedPath } from '../core/path-pattern.js'

/**
 * The proxy matches routes on the path it sees, and the upstream acts on the path it
 * normalises. Anything the two could read differently is refused outright rather than
 * normalised, since servers disagree about how to normalise: dot segments, `;` (path
 * parameters: Tomcat, Jetty and Spring drop `;…` and then resolve `..;`), empty segments
 * (`//`, which many servers merge), percent-encoded unreserved characters (`%73` is `s` to
 * the upstream, not to the route table), encoded slashes or backslashes, an encoded `%`
 * (read twice by a double-decoding upstream), backslashes and control characters, raw or
 * encoded, and an escape that is not UTF-8 (or a `%` that starts none). /v1/check and /v1/execute apply these rules too (execute/upstream-url.ts), plus their
 * own. Returns what is wrong, or null for a path that is safe to match.
 */
export function unsafePathProblem(pathWithQuery: string): string | null {
  const q = pathWithQuery.indexOf('?')
  const path = q === -1 ? pathWithQuery : pathWithQuery.slice(0, q)
  if (!path.startsWith('/')) return 'the path must start with /'
  if (pathWithQuery.includes('\\')) return 'a backslash'
  if (pathWithQuery.includes('#')) return 'a #'
  if (hasControlCharacter(pathWithQuery)) return 'a control character'
  if (path.includes(';')) return 'a ; in the path'
  if (path.includes('//')) return 'an empty segment (//)'
  // Checked on every request: the percent and dot rules only when there is a % or a dot.
  if (path.includes('%')) {
    if (/%(2f|5c)/i.test(path)) return 'an encoded slash or backslash'
    // An upstream that decodes twice reads `%2573` as `s`; one that trims reads `%09` as nothing.
    if (/%25/.test(path)) return 'an encoded % (%25)'
    if (/%([01][0-9a-f]|7f)/i.test(path)) return 'an encoded control byte'
    if (ENCODED_UNRESERVED.test(path)) return 'a percent-encoded letter, digit or -._~'
    // Routes are matched on the decoded path (path-pattern.ts): one that does not decode could
    // not be matched as the upstream reads it.
    const decoded = decodedPath(path)
    if (decoded === null) return 'a % that is not a UTF-8 escape'
    if (nfkcPathSyntax(decoded)) return 'a character NFKC reads as / \\ . ; % ? or #'
  }
  if (path.includes('.')) {
    for (const segment of path.split('/')) {
      if (segment === '.' || segment === '..') return 'a dot segment'
    }
  }
  return null
}

const PATH_SYNTAX = '/\\.;%?#'

/**
 * Whether a character past ASCII reads, under NFKC (as an upstream that maps fullwidth forms to
 * ASCII reads it, and as routes are matched: path-pattern.ts), as path syntax: `．．` is `..`
 * and `／` is `/` there, a traversal no dot-segment rule would see (found in review).
 */
function nfkcPathSyntax(decoded: string): boolean {
  for (const c of decoded) {
    if (c.charCodeAt(0) < 0x80) continue
    const n = c.normalize('NFKC')
    for (let i = 0; i < n.length; i++) {
      const code = n.charCodeAt(i)
      if (code < 0x20 || code === 0x7f || PATH_SYNTAX.includes(n[i] as string)) return true
    }
  }
  return false
}

/** RFC 3986 unreserved characters, percent-encoded: A-Z, a-z, 0-9, `-`, `.`, `_`, `~` (hex in any case). */
const ENCODED_UNRESERVED = /%(4[1-9a-f]|5[0-9a]|6[1-9a-f]|7[0-9a]|3[0-9]|2d|2e|5f|7e)/i

function hasControlCharacter(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    if (c < 0x20 || c === 0x7f) return true
  }
  return false
}
