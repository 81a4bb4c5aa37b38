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

export function compilePathPattern(source: string): PathPattern {
  const names: string[] = []
  let re = '^'
  const wildcard = source.endsWith('*')
  let body = wildcard ? source.slice(0, -1) : source
  // `/a/` and `/a`, `/a/*` and `/a*` are one route each.
  if (body.endsWith('/')) body = body.slice(0, -1)
  for (const part of body.split(/(\{[A-Za-z_][A-Za-z0-9_]*\})/)) {
    const m = /^\{([A-Za-z_][A-Za-z0-9_]*)\}$/.exec(part)
    if (m) {
      names.push(m[1] as string)
      re += '([^/]+)'
    } else re += escapeRegex(part)
  }
  // `/v1/stream*` is `/v1/stream` and anything below it, not `/v1/streamXYZ`. A route is also its
  // path with a format suffix (Rails routes `/v1/refunds.json` to `/v1/refunds`) and with
  // trailing dots or spaces (IIS drops them): otherwise such a path would escape the route to a
  // broader one, or to none.
  re += `(?:\\.[A-Za-z0-9]+)?(?:\\.|%20)*${wildcard ? '(?:/.*)?$' : '/?$'}`
  const regex = new RegExp(re, 'i')
  return {
    source,
    match(path) {
      const m = regex.exec(path)
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
