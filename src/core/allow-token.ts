import { createHmac, timingSafeEqual } from 'node:crypto'

/**
 * ALLOW tokens: short-lived, signed proof of one ALLOW decision, bound to tenant, key,
 * verb and target (and, when the check named a request, to that request's binding).
 * Format `wgt_<base64url(JSON claims)>.<base64url(HMAC-SHA256)>`; it never starts with `svc_`.
 */
export const ALLOW_TOKEN_PREFIX = 'wgt_'

export interface AllowTokenClaims {
  v: 1
  tid: string
  kid: string
  pid: string
  verb: string
  tgt: string | null
  env: string | null
  iat: number
  exp: number
  /** Unique id; equals the leaseId when the token is bound to a request. */
  jti: string
  bind: { sys: string; h: string } | null
}

function mac(key: Buffer, payload: string): Buffer {
  return createHmac('sha256', key).update(`${ALLOW_TOKEN_PREFIX}${payload}`).digest()
}

export function signAllowToken(key: Buffer, claims: AllowTokenClaims): string {
  const payload = Buffer.from(JSON.stringify(claims)).toString('base64url')
  return `${ALLOW_TOKEN_PREFIX}${payload}.${mac(key, payload).toString('base64url')}`
}

export type OpenedToken =
  | { ok: true; claims: AllowTokenClaims }
  | { ok: false; reason: 'malformed' | 'bad_signature' }

/** Checks shape and signature only; expiry, tenant, revocation and use are the caller's. */
export function openAllowToken(key: Buffer, token: string): OpenedToken {
  if (typeof token !== 'string' || token.length > 4096 || !token.startsWith(ALLOW_TOKEN_PREFIX))
    return { ok: false, reason: 'malformed' }
  const parts = token.slice(ALLOW_TOKEN_PREFIX.length).split('.')
  if (
    parts.length !== 2 ||
    !/^[A-Za-z0-9_-]+$/.test(parts[0] ?? '') ||
    !/^[A-Za-z0-9_-]+$/.test(parts[1] ?? '')
  )
    return { ok: false, reason: 'malformed' }
  const [payload, sig] = parts as [string, string]
  let claims: unknown
  try {
    claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'))
  } catch {
    return { ok: false, reason: 'malformed' }
  }
  if (!isClaims(claims)) return { ok: false, reason: 'malformed' }
  const expected = mac(key, payload)
  const given = Buffer.from(sig, 'base64url')
  if (given.length !== expected.length || !timingSafeEqual(given, expected))
    return { ok: false, reason: 'bad_signature' }
  return { ok: true, claims }
}

function isClaims(c: unknown): c is AllowTokenClaims {
  if (!c || typeof c !== 'object') return false
  const o = c as Record<string, unknown>
  const str = (k: string) => typeof o[k] === 'string'
  const strOrNull = (k: string) => o[k] === null || typeof o[k] === 'string'
  const bind = o.bind as Record<string, unknown> | null | undefined
  return (
    o.v === 1 &&
    str('tid') &&
    str('kid') &&
    str('pid') &&
    str('verb') &&
    str('jti') &&
    strOrNull('tgt') &&
    strOrNull('env') &&
    Number.isInteger(o.iat) &&
    Number.isInteger(o.exp) &&
    (bind === null ||
      (typeof bind === 'object' && typeof bind?.sys === 'string' && typeof bind?.h === 'string'))
  )
}
