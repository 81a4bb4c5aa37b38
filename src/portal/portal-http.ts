import { timingSafeEqual } from 'node:crypto'
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { ERRORS, type ErrorDef, WriteGateError } from '../core/errors.js'
import { isStorableString } from '../core/storable-json.js'
import { ClientLeft } from '../node-http/client-leaves.js'
import { serviceUnavailable } from '../node-http/service-unavailable.js'
import type { Html } from './html.js'
import { errorPage } from './pages/error.js'
import { csrfTokenOf, type PortalSession, type PortalSessions } from './portal-sessions.js'

/**
 * Portal cookies are set for the whole origin (`Path=/`): the API's `GET /v1/receipts/stats`
 * reads the session too, and only such a cookie can be a `__Host-` one (cookieName).
 */
export const SESSION_COOKIE = 'wg_portal'
/** Before sign-in there is no session: a double-submit token guards the sign-in form (login CSRF). */
export const PRE_SESSION_COOKIE = 'wg_portal_pre'
const FORM_LIMIT_BYTES = 64 * 1024

/** No inline script or style anywhere, nothing framed, nothing loaded from elsewhere. */
export const PORTAL_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "form-action 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
].join('; ')

/** On every answer under /portal (app.ts sets them, so a 404 or a malformed URL there has them too). */
export const PORTAL_SECURITY_HEADERS = {
  'content-security-policy': PORTAL_CSP,
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  // not no-referrer: under it a browser sends `Origin: null` with every form, and the origin check needs the real one.
  'referrer-policy': 'same-origin',
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
  'cache-control': 'no-store',
}

/**
 * Whether a request's URL is under /portal as the router reads it: an ASCII character may come
 * percent-encoded (`/%70ortal/sign-in` is the sign-in page; found in review, it had no headers).
 * Only ASCII escapes are read, so a malformed one (refused before routing) still decides.
 */
export function isPortalPath(url: string): boolean {
  // Every API request passes here (a root hook): only a URL with an escape is rewritten.
  const path = url.includes('%')
    ? url.replace(/%([0-7][0-9a-f])/gi, (_, hex: string) => String.fromCharCode(Number.parseInt(hex, 16)))
    : url
  return path === '/portal' || /^\/portal[/?#]/.test(path)
}

declare module 'fastify' {
  interface FastifyRequest {
    portal: PortalSession | null
  }
}

export function cookiesOf(req: FastifyRequest): Map<string, string> {
  const out = new Map<string, string>()
  const header = req.headers.cookie
  if (!header) return out
  for (const part of header.split(';')) {
    const eq = part.indexOf('=')
    if (eq <= 0) continue
    const name = part.slice(0, eq).trim()
    // The first of two cookies of one name wins (the most specific path, as browsers send them).
    if (!out.has(name)) out.set(name, part.slice(eq + 1).trim())
  }
  return out
}

/**
 * A cookie's name for this request. Over TLS (or when a trusted proxy says so) it carries the
 * prefix browsers enforce, `__Host-`: Secure, set by this host only, path /. A cookie of the
 * plain name (set by a sibling subdomain, or over plain HTTP by someone on the path) is then not
 * read: it cannot fix a session on the sponsor. Over plain HTTP (a laptop) browsers refuse the
 * prefix.
 */
export function cookieName(req: FastifyRequest, name: string): string {
  return req.protocol === 'https' ? `__Host-${name}` : name
}

/** The value of a portal cookie the request carries, under this request's name for it. */
export function readCookie(req: FastifyRequest, name: string): string | undefined {
  return cookiesOf(req).get(cookieName(req, name))
}

/** Secure whenever the request came over TLS, or a trusted proxy says it did (trustProxy). */
export function cookie(req: FastifyRequest, name: string, value: string, maxAgeSeconds: number): string {
  const secure = req.protocol === 'https' ? '; Secure' : ''
  return `${cookieName(req, name)}=${value}; Path=/; Max-Age=${maxAgeSeconds}; HttpOnly; SameSite=Strict${secure}`
}

export function sendPage(reply: FastifyReply, page: Html, status = 200): FastifyReply {
  return reply.code(status).type('text/html; charset=utf-8').send(page.value)
}

function sameToken(a: string | undefined, b: string | undefined): boolean {
  if (!a || !b) return false
  const ab = Buffer.from(a)
  const bb = Buffer.from(b)
  return ab.length === bb.length && timingSafeEqual(ab, bb)
}

/** A form must come from the portal's own origin, when the browser says where it came from. */
function crossOrigin(req: FastifyRequest): boolean {
  if (req.headers['sec-fetch-site'] === 'cross-site') return true
  const origin = req.headers.origin
  if (origin === undefined) return false
  return origin !== `${req.protocol}://${req.host}`
}

/** A state-changing form of a signed-in page: the session's CSRF token, from the portal's origin. */
export function checkCsrf(req: FastifyRequest, session: PortalSession, form: Record<string, string>): void {
  if (crossOrigin(req) || !sameToken(form._csrf, session.csrfToken))
    throw new WriteGateError(ERRORS.csrfInvalid)
}

/** Signing out: the form's token must be the one of the session the cookie names, live or not. */
export function checkSignOutCsrf(req: FastifyRequest, token: string, form: Record<string, string>): void {
  if (crossOrigin(req) || !sameToken(form._csrf, csrfTokenOf(token)))
    throw new WriteGateError(ERRORS.csrfInvalid)
}

/** The sign-in form: its hidden token must equal the pre-session cookie the sign-in page set. */
export function checkPreSessionCsrf(req: FastifyRequest, form: Record<string, string>): void {
  if (crossOrigin(req) || !sameToken(form._csrf, readCookie(req, PRE_SESSION_COOKIE)))
    throw new WriteGateError(ERRORS.csrfInvalid)
}

/** The parsed form: every field a string (the last of repeated ones). */
const UTF8 = new TextDecoder('utf-8', { fatal: true })

/**
 * A form as the API reads a JSON body: UTF-8 (browsers encode forms so; bytes that are not are
 * refused, never replaced, or two spellings would collapse into one audited value) and no field
 * holding what storage cannot (a NUL reached Postgres as a 500).
 */
export function readForm(body: Buffer): URLSearchParams | string {
  let text: string
  try {
    text = UTF8.decode(body)
  } catch {
    return 'the form is not UTF-8'
  }
  for (const field of text.split('&'))
    try {
      decodeURIComponent(field.replaceAll('+', ' '))
    } catch {
      return 'the form holds percent-encoding that is malformed or not UTF-8'
    }
  const form = new URLSearchParams(text)
  for (const [name, value] of form)
    if (!isStorableString(name) || !isStorableString(value))
      return 'a form field holds a NUL character or an unpaired surrogate'
  return form
}

export function formOf(req: FastifyRequest): Record<string, string> {
  const body = req.body
  if (!(body instanceof URLSearchParams)) throw new WriteGateError(ERRORS.unsupportedMediaType)
  return Object.fromEntries(body.entries())
}

const FASTIFY_CODES: Record<string, ErrorDef> = {
  FST_ERR_CTP_BODY_TOO_LARGE: ERRORS.payloadTooLarge,
  FST_ERR_CTP_INVALID_MEDIA_TYPE: ERRORS.unsupportedMediaType,
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: ERRORS.invalidRequest,
  FST_ERR_CTP_INVALID_TYPE: ERRORS.unsupportedMediaType,
  FST_ERR_CTP_INVALID_JSON_BODY: ERRORS.invalidJson,
  FST_ERR_CTP_EMPTY_JSON_BODY: ERRORS.invalidJson,
}

/**
 * The portal's plumbing, in its own encapsulated context: forms (urlencoded, 64 KiB), security
 * headers on every answer, the session from its cookie, and errors as pages with the
 * registry's status and code (the API keeps its JSON).
 */
export function installPortalHttp(app: FastifyInstance, sessions: PortalSessions): void {
  app.addContentTypeParser(
    /^application\/x-www-form-urlencoded(\s*;.*)?$/i,
    { parseAs: 'buffer', bodyLimit: FORM_LIMIT_BYTES },
    (_req, body, done) => {
      const form = readForm(body as Buffer)
      if (typeof form === 'string')
        return done(new WriteGateError(ERRORS.invalidRequest, undefined, { message: form }), undefined)
      done(null, form)
    },
  )
  app.decorateRequest('portal', null)
  app.addHook('onRequest', async (req) => {
    req.portal = await sessions.resolve(readCookie(req, SESSION_COOKIE))
  })
  app.setErrorHandler((err: FastifyError, req, reply) => {
    // No one is there to read a page: none is written, and nothing went wrong.
    if ((err as Error) instanceof ClientLeft) return reply.hijack()
    let def: ErrorDef | undefined
    let message: string | undefined
    if (err instanceof WriteGateError) {
      def = err.def
      message = err.message
      if (err.headers) reply.headers(err.headers)
    } else if (err.validation) {
      def = ERRORS.invalidRequest
    } else if (err.code) {
      def = FASTIFY_CODES[err.code]
    }
    const outage = def ? null : serviceUnavailable(err)
    if (outage) {
      def = outage.def
      req.log.error(
        { err: { message: err.message, code: err.code }, ...outage.detail },
        'portal request failed: unavailable',
      )
    }
    if (!def || def.status >= 500) {
      if (!def || def === ERRORS.internal) req.log.error({ err }, 'portal request failed')
      def ??= ERRORS.internal
    }
    return sendPage(reply, errorPage(req.portal, def.status, def.code, message ?? def.message), def.status)
  })
}

/** The portal session a request's cookie names, for API routes that accept one. */
export function portalSessionOf(
  req: FastifyRequest,
  sessions: PortalSessions,
): Promise<PortalSession | null> {
  return sessions.resolve(readCookie(req, SESSION_COOKIE))
}

/** The signed-in session of a page request; pages redirect to sign-in, anything else is 401. */
export function sessionOf(req: FastifyRequest): PortalSession {
  if (!req.portal) throw new WriteGateError(ERRORS.portalSessionRequired)
  return req.portal
}
