import { randomBytes, scrypt as scryptCb, timingSafeEqual } from 'node:crypto'
import { promisify } from 'node:util'

const scrypt = promisify(scryptCb) as (pw: string, salt: Buffer, len: number, opts: object) => Promise<Buffer>

/** Crockford-style alphabet: no 0/O or 1/I/L confusion when read off paper. */
const ALPHABET = '23456789ABCDEFGHJKMNPQRSTVWXYZ'
/** N=2^14: about 20-40 ms per hash, run off the event loop. Backup codes are short, so they get a slow hash. */
const SCRYPT = { N: 16384, r: 8, p: 1, maxmem: 64 * 1024 * 1024 }

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

export async function hashBackupCode(code: string, salt?: Buffer): Promise<{ salt: string; hash: string }> {
  const s = salt ?? randomBytes(16)
  const h = await scrypt(normalizeBackupCode(code), s, 32, SCRYPT)
  return { salt: s.toString('base64'), hash: h.toString('base64') }
}

export async function backupCodeMatches(code: string, salt: string, hash: string): Promise<boolean> {
  const h = await scrypt(normalizeBackupCode(code), Buffer.from(salt, 'base64'), 32, SCRYPT)
  const expected = Buffer.from(hash, 'base64')
  return expected.length === h.length && timingSafeEqual(h, expected)
}
