import { randomBytes, scrypt as scryptCb, timingSafeEqual } from 'node:crypto'
import { promisify } from 'node:util'

const scrypt = promisify(scryptCb) as (pw: string, salt: Buffer, len: number, opts: object) => Promise<Buffer>

/** Crockford-style alphabet: no 0/O or 1/I/L confusion when read off paper. */
const ALPHABET = '23456789ABCDEFGHJKMNPQRSTVWXYZ'
/**
 * scrypt's cost as log2(N): 2^14, about 20-40 ms per hash, run off the event loop. Backup codes
 * are short (about 49 bits), so they get a slow hash against an offline guesser.
 */
export const BACKUP_CODE_COST = 14
/** Costs a stored hash may name: below 10 is too cheap to mean anything, above 16 needs more than 64 MiB. */
const COSTS = { min: 10, max: 16 }
const R = 8
/** A stored hash names its parameters (the PHC string format), so a cost change never strands a code. */
const PHC = /^\$scrypt\$ln=(\d{1,2}),r=8,p=1\$([A-Za-z0-9+/]+={0,2})$/

function scryptParams(cost: number) {
  // scrypt needs 128 * r * N bytes, plus room for its own bookkeeping.
  return { N: 2 ** cost, r: R, p: 1, maxmem: 256 * R * 2 ** cost }
}

export const BACKUP_CODE_COUNT = 10

/** `XXXXX-XXXXX`: 10 symbols of 30, about 49 bits. */
export function newBackupCode(): string {
  let s = ''
  const bytes = randomBytes(20)
  for (const b of bytes) {
    if (b >= 240) continue // 240 = 30 * 8: keep the draw uniform
    s += ALPHABET[b % 30]
    if (s.length === 10) break
  }
  return s.length === 10 ? `${s.slice(0, 5)}-${s.slice(5)}` : newBackupCode()
}

export function normalizeBackupCode(code: string): string {
  return code.replace(/[\s-]/g, '').toUpperCase()
}

/**
 * The salt (base64) and `$scrypt$ln=<cost>,r=8,p=1$<hash>`. `cost` is the default but for tests,
 * which hand in a cheaper one (ControlPlaneOverrides.backupCodeCost) for the many tenants they make.
 */
export async function hashBackupCode(
  code: string,
  cost = BACKUP_CODE_COST,
  salt?: Buffer,
): Promise<{ salt: string; hash: string }> {
  if (!Number.isInteger(cost) || cost < COSTS.min || cost > COSTS.max)
    throw new RangeError(`backup code cost must be an integer from ${COSTS.min} to ${COSTS.max}`)
  const s = salt ?? randomBytes(16)
  const h = await scrypt(normalizeBackupCode(code), s, 32, scryptParams(cost))
  return { salt: s.toString('base64'), hash: `$scrypt$ln=${cost},r=${R},p=1$${h.toString('base64')}` }
}

/**
 * Whether `code` is the one hashed. A hash stored before hashes named their cost (plain base64)
 * was made at 2^14. One that names a cost out of range, or is not a hash at all, matches nothing.
 */
export async function backupCodeMatches(code: string, salt: string, hash: string): Promise<boolean> {
  const phc = PHC.exec(hash)
  const cost = phc ? Number(phc[1]) : 14
  const stored = phc ? phc[2] : hash
  if (cost < COSTS.min || cost > COSTS.max || stored === undefined) return false
  const expected = Buffer.from(stored, 'base64')
  if (expected.length !== 32) return false
  const h = await scrypt(normalizeBackupCode(code), Buffer.from(salt, 'base64'), 32, scryptParams(cost))
  return timingSafeEqual(h, expected)
}
