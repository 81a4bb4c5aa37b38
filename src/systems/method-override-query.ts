/**
 * A `_method` query parameter asks Rails, Laravel or Symfony to run a POST as another method
 * (`POST /v1/repos/x?_method=DELETE` runs as the DELETE), so a write gated under the POST's verb
 * would be carried out under another. Every transport refuses one: gate-proxy (400
 * method_override), /v1/check and /v1/execute (the same), and the paths of tools and approvals.
 */

/**
 * A query parameter's name as PHP registers it (`php_register_variable_ex`): leading spaces
 * dropped, `.` and space made `_`, and an `[` made `_` unless it opens an array (`a[b]` is `a`).
 * Symfony and Laravel read `_method` from what PHP registered, so `.method` and `[method` are it.
 */
function phpName(name: string): string {
  let n = name.replace(/^ +/, '')
  const open = n.indexOf('[')
  if (open > 0 && n.indexOf(']', open) > open) n = n.slice(0, open)
  return n.replace(/[ .[]/g, '_')
}

/**
 * Whether the query string has a `_method` parameter: any case, percent-encoded or not, `&` or
 * `;` separated, or spelled as PHP would register it as `_method`.
 */
export function carriesMethodOverride(pathWithQuery: string): boolean {
  const q = pathWithQuery.indexOf('?')
  if (q === -1) return false
  return pathWithQuery
    .slice(q + 1)
    .split(/[&;]/)
    .some((pair) => {
      const name = (pair.split('=')[0] as string).replace(/\+/g, ' ')
      let decoded = name
      try {
        decoded = decodeURIComponent(name)
      } catch {}
      return phpName(decoded).trim().toLowerCase() === '_method'
    })
}

/**
 * Whether a JSON body has a top-level `_method` member (as the query is read): Laravel reads a
 * JSON request's body as its parameters, and Symfony's method override reads `_method` there,
 * so `POST {"_method":"DELETE"}` runs as the DELETE (found in review). /v1/check and
 * /v1/execute parse the body and refuse it; gate-proxy streams bodies and cannot.
 */
export function bodyCarriesMethodOverride(body: unknown): boolean {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return false
  return Object.keys(body).some((k) => phpName(k).trim().toLowerCase() === '_method')
}
