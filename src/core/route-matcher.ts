import type { SystemRoute } from './enrolled-system.js'
import { compilePathPattern, fillTemplate, type PathSpellings, pathSpellings } from './path-pattern.js'

export interface RouteMatch {
  verb: string
  /** Filled from the route's target template, or null when the route has none. */
  target: string | null
}

export interface RouteMatcher {
  match(method: string, pathWithQuery: string): RouteMatch | null
}

/**
 * A system's routes as one matcher: the first route whose method and path pattern match
 * decides the verb (patterns compare leniently: see path-pattern.ts). The proxy maps intercepted writes with it, and /v1/check maps the
 * `request` it is asked to lease, so both gate a request under the same verb.
 */
export function compileRoutes(routes: readonly SystemRoute[]): RouteMatcher {
  const compiled = routes.map((r) => ({
    method: r.method,
    pattern: compilePathPattern(r.path),
    verb: r.verb,
    target: r.target,
  }))
  const find = (method: string, path: PathSpellings): RouteMatch | null => {
    for (const r of compiled) {
      if (r.method !== method) continue
      const params = r.pattern.matchSpellings(path)
      if (params)
        return { verb: r.verb, target: r.target === undefined ? null : fillTemplate(r.target, params) }
    }
    return null
  }
  return {
    match(method, pathWithQuery) {
      // Decoded and spelled once for every route tried.
      const path = pathSpellings(pathWithQuery.split('?')[0] as string)
      // Upstream frameworks answer HEAD with their GET handler: a gated GET gates its HEAD too,
      // unless a HEAD route of its own says otherwise.
      return find(method, path) ?? (method === 'HEAD' ? find('GET', path) : null)
    },
  }
}
