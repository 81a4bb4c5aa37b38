/**
 * Route path patterns: literal segments, `{name}` placeholders (one segment each) and an
 * optional trailing `*` (the rest, at a segment boundary). Matched against the path
 * percent-decoded, as Werkzeug, Go's net/http and fastify's router read it before they route
 * (the raw path was first refused if an upstream could read it as another path: safe-path.ts).
 * Matched raw, `/v1/users/%40me` escaped a route `/v1/users/@me` that the upstream ran (found in
 * review).
 *
 * Upstreams differ in how they compare paths, so a pattern matches the way the most lenient
 * of them would: letters in any case (Unicode's too), and with or without one trailing slash. A
 * route that matches more requests gates more of them; a route that matched less would let a
 * read reach a case-insensitive upstream ungated.
 */
export interface PathPattern {
  readonly source: string
  match(path: string): Record<string, string> | null
}

function escapeRegex(s: string): string {
  return s.replace(/[.*+?^$()|[\]\\{}]/g, '\\$&')
}

/**
 * The path as an upstream that percent-decodes it reads it, or null when an escape is not UTF-8
 * or a `%` starts none (safe-path.ts refuses such a path before any match).
 */
export function decodedPath(path: string): string | null {
  if (!path.includes('%')) return path
  try {
    return decodeURIComponent(path)
  } catch {
    return null
  }
}

/**
 * The spellings a lenient upstream may route a decoded path past ASCII as: itself, its NFKC form
 * (IIS maps fullwidth letters to ASCII ones), and each lower- and upper-cased (fastify lower-cases
 * a path, so U+212A KELVIN SIGN is `k`; .NET upper-cases, so `ı` is `I`). Matched with Unicode
 * case folding besides (`ſ` is `s`).
 */
function spellings(decoded: string): string[] {
  const forms = new Set([decoded, decoded.normalize('NFKC')])
  for (const f of [...forms]) {
    forms.add(f.toLowerCase())
    forms.add(f.toUpperCase())
  }
  return [...forms]
}

const PAST_ASCII = /[^\x00-\x7f]/

/**
 * `path` without its trailing dots and spaces (raw or encoded), which IIS drops. A loop from the
 * end, not `/(?:\.|%20)+$/`: that expression retries from every dot of a long run and is quadratic.
 */
function withoutTrailingDots(path: string): string {
  let end = path.length
  for (;;) {
    if (path[end - 1] === '.' || path[end - 1] === ' ') end -= 1
    else if (end >= 3 && path[end - 3] === '%' && path[end - 2] === '2' && path[end - 1] === '0') end -= 3
    else return path.slice(0, end)
  }
}

/**
 * `path` without one format suffix (`.json`), which Rails routes to the path without it. Any
 * characters but `.` and `/` after the last dot, as Rails's `:format` takes them: `.x-y` too
 * (found in review: only letters and digits were dropped, and `/v1/refunds.x-y` escaped its route).
 */
function withoutFormatSuffix(path: string): string {
  let start = path.length
  while (start > 0 && path[start - 1] !== '.' && path[start - 1] !== '/') start -= 1
  return start < path.length && path[start - 1] === '.' ? path.slice(0, start - 1) : path
}

/** `path` cut before its slash number `n + 1` (its first `n` segments), or whole. */
function firstSegments(path: string, n: number): string {
  let at = 0
  for (let i = 0; i < n; i++) {
    at = path.indexOf('/', at + 1)
    if (at < 0) return path
  }
  return path.slice(0, at)
}

export function compilePathPattern(source: string): PathPattern {
  const names: string[] = []
  let re = '^'
  const wildcard = source.endsWith('*')
  let body = wildcard ? source.slice(0, -1) : source
  // A route's escapes are read as a request's are (`/v1/a%40b` is `/v1/a@b`).
  body = decodedPath(body) ?? body
  // `/a/` and `/a`, `/a/*` and `/a*` are one route each.
  if (body.endsWith('/')) body = body.slice(0, -1)
  const parts = body.split(/(\{[A-Za-z_][A-Za-z0-9_]*\})/)
  // `/v1/x.` is `/v1/x` with a trailing dot, which the path may or may not keep (below).
  const last = parts.length - 1
  parts[last] = withoutTrailingDots(parts[last] as string)
  for (const part of parts) {
    const m = /^\{([A-Za-z_][A-Za-z0-9_]*)\}$/.exec(part)
    if (m) {
      names.push(m[1] as string)
      re += '([^/]+)'
    } else re += escapeRegex(part)
  }
  const regex = new RegExp(`${re}$`, 'i')
  // For a path past ASCII: `i` alone folds ASCII letters only.
  let unicodeRegex: RegExp | null = null
  // Placeholders never span a `/`, so the route's segments end at a fixed count of them.
  const slashes = body.split('/').length - 1

  const exec = (path: string, regex: RegExp): RegExpExecArray | null => {
    let p = path
    // `/v1/stream*` is `/v1/stream` and anything below it, not `/v1/streamXYZ`.
    if (wildcard) p = firstSegments(p, slashes)
    else if (p.endsWith('/')) p = p.slice(0, -1)
    // A route is also its path with a format suffix (Rails routes `/v1/refunds.json` to
    // `/v1/refunds`) and with trailing dots or spaces (IIS drops them): otherwise such a path
    // would escape the route to a broader one, or to none. Tried as at most four exact matches,
    // not one expression with optional tails: after a trailing `{placeholder}` the two can
    // divide the same dots in every way, and an agent's long path of them backtracked for
    // seconds (found in review).
    const m = regex.exec(p)
    if (m) return m
    const undotted = withoutTrailingDots(p)
    if (undotted !== p) {
      const u = regex.exec(undotted)
      if (u) return u
    }
    const bare = withoutFormatSuffix(undotted)
    if (bare === undotted) return null
    const b = regex.exec(bare)
    if (b) return b
    // A route's own trailing dots are dropped (above), so the path's before the suffix go too:
    // `/v1/x.` is `/v1/x..json`.
    const bareUndotted = withoutTrailingDots(bare)
    return bareUndotted !== bare ? regex.exec(bareUndotted) : null
  }

  const execLenient = (path: string): RegExpExecArray | null => {
    // A path with no escape and no character past ASCII (nearly every one) pays for neither.
    const decoded = decodedPath(path) ?? path
    if (!PAST_ASCII.test(decoded)) return exec(decoded, regex)
    unicodeRegex ??= new RegExp(`${re}$`, 'iu')
    for (const form of spellings(decoded)) {
      const m = exec(form, unicodeRegex)
      if (m) return m
    }
    return null
  }

  return {
    source,
    match(path) {
      const m = execLenient(path)
      if (!m) return null
      // Captured from the decoded path: already decoded.
      const params: Record<string, string> = {}
      names.forEach((n, i) => {
        params[n] = m[i + 1] as string
      })
      return params
    },
  }
}

/** Fills `{name}` placeholders of a target template; unknown names stay as written. */
export function fillTemplate(template: string, params: Readonly<Record<string, string>>): string {
  return template.replace(/\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (whole, name: string) => params[name] ?? whole)
}
