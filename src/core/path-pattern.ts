/**
 * Route path patterns: literal segments, `{name}` placeholders (one segment each) and an
 * optional trailing `*` (the rest, at a segment boundary). Matched against the raw (still
 * percent-encoded) path, which has already been refused if the upstream could read it as
 * another path (see safe-path.ts).
 *
 * Upstreams differ in how they compare paths, so a pattern matches the way the most lenient
 * of them would: letters in any case, and with or without one trailing slash. A route that
 * matches more requests gates more of them; a route that matched less would let a read reach a
 * case-insensitive upstream ungated.
 */
export interface PathPattern {
  readonly source: string
  match(path: string): Record<string, string> | null
}

function escapeRegex(s: string): string {
  return s.replace(/[.*+?^$()|[\]\\{}]/g, '\\$&')
}

/**
 * `path` without its trailing dots and encoded spaces, which IIS drops. A loop from the end, not
 * `/(?:\.|%20)+$/`: that expression retries from every dot of a long run and is quadratic.
 */
function withoutTrailingDots(path: string): string {
  let end = path.length
  for (;;) {
    if (path[end - 1] === '.') end -= 1
    else if (end >= 3 && path[end - 3] === '%' && path[end - 2] === '2' && path[end - 1] === '0') end -= 3
    else return path.slice(0, end)
  }
}

/** `path` without one format suffix (`.json`), which Rails routes to the path without it. */
function withoutFormatSuffix(path: string): string {
  let start = path.length
  while (start > 0 && /[A-Za-z0-9]/.test(path[start - 1] as string)) start -= 1
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
  // Placeholders never span a `/`, so the route's segments end at a fixed count of them.
  const slashes = body.split('/').length - 1

  const exec = (path: string): RegExpExecArray | null => {
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

  return {
    source,
    match(path) {
      const m = exec(path)
      if (!m) return null
      const params: Record<string, string> = {}
      names.forEach((n, i) => {
        const raw = m[i + 1] as string
        try {
          params[n] = decodeURIComponent(raw)
        } catch {
          params[n] = raw
        }
      })
      return params
    },
  }
}

/** Fills `{name}` placeholders of a target template; unknown names stay as written. */
export function fillTemplate(template: string, params: Readonly<Record<string, string>>): string {
  return template.replace(/\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (whole, name: string) => params[name] ?? whole)
}
