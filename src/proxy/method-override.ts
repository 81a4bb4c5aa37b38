/**
 * Ways a request can ask the upstream for another method, path, host or scheme than the one
 * the proxy decided on. Frameworks honour them (a POST gated as `verify` runs as DELETE under
 * `X-HTTP-Method-Override: DELETE`; `X-Original-URL` re-routes it), so the headers are never
 * forwarded and a `_method` query parameter is refused. (A `_method` field in a form body is
 * not looked at: the body is streamed, not parsed.)
 */
export const OVERRIDE_HEADERS = [
  // method
  'x-http-method-override',
  'x-http-method',
  'x-method-override',
  'x-original-method',
  // path
  'x-original-url',
  'x-original-uri',
  'x-rewrite-url',
  'x-forwarded-prefix',
  'x-forwarded-path',
  'x-forwarded-uri',
  // host, scheme and client, as a reverse proxy in front of the upstream would set them
  'forwarded',
  'x-forwarded-for',
  'x-forwarded-host',
  'x-forwarded-port',
  'x-forwarded-proto',
  'x-forwarded-scheme',
  'x-forwarded-server',
  'x-forwarded-ssl',
  'x-original-host',
  'x-real-ip',
]

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
