import { isBase62, randomBase62 } from './random.js'

/**
 * Secret formats (contract §2). The random part is base62, so it never holds `_`
 * and the prefixes can never be confused with one another.
 */
export const CREDENTIAL_PREFIX = {
  apiKey: 'svc_',
  sponsor: 'svc_sp_',
  badge: 'svc_badge_',
} as const

const SECRET_LENGTH = 40
const MIN_SECRET_LENGTH = 32
const MAX_CREDENTIAL_LENGTH = 200

export type CredentialKind = 'apiKey' | 'sponsor' | 'badge'

export function newApiKey(): string {
  return CREDENTIAL_PREFIX.apiKey + randomBase62(SECRET_LENGTH)
}
export function newSponsorToken(): string {
  return CREDENTIAL_PREFIX.sponsor + randomBase62(SECRET_LENGTH)
}
export function newBadgeToken(): string {
  return CREDENTIAL_PREFIX.badge + randomBase62(SECRET_LENGTH)
}
/** Invite codes are opaque; they carry no `svc_` prefix so they can never pass for a credential. */
export function newInviteCode(): string {
  return `inv_${randomBase62(32)}`
}

/** Classifies a bearer value by shape alone. Returns null for anything malformed. */
export function classifyCredential(value: string): CredentialKind | null {
  if (value.length > MAX_CREDENTIAL_LENGTH) return null
  const check = (prefix: string): boolean => {
    const rest = value.slice(prefix.length)
    return rest.length >= MIN_SECRET_LENGTH && isBase62(rest)
  }
  if (value.startsWith(CREDENTIAL_PREFIX.sponsor)) return check(CREDENTIAL_PREFIX.sponsor) ? 'sponsor' : null
  if (value.startsWith(CREDENTIAL_PREFIX.badge)) return check(CREDENTIAL_PREFIX.badge) ? 'badge' : null
  if (value.startsWith(CREDENTIAL_PREFIX.apiKey)) return check(CREDENTIAL_PREFIX.apiKey) ? 'apiKey' : null
  return null
}
