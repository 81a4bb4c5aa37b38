/**
 * Ways a request can ask the upstream for another method, path, host or scheme than the one
 * the proxy decided on. Frameworks honour them (a POST gated as `verify` runs as DELETE under
 * `X-HTTP-Method-Override: DELETE`; `X-Original-URL` re-routes it), so the headers are never
 * forwarded and a `_method` query parameter is refused (systems/method-override-query.ts). (A
 * `_method` field in a form body is not looked at: the body is streamed, not parsed.)
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
