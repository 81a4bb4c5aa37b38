import { randomBytes } from 'node:crypto'

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz'

/**
 * Uniform base62 string from a CSPRNG. Bytes >= 248 are rejected so every
 * character is equally likely (248 = 62 * 4).
 */
export function randomBase62(length: number): string {
  let out = ''
  while (out.length < length) {
    const bytes = randomBytes(length * 2)
    for (const b of bytes) {
      if (b < 248) out += BASE62[b % 62]
      if (out.length === length) break
    }
  }
  return out
}

export function isBase62(s: string): boolean {
  return /^[0-9A-Za-z]+$/.test(s)
}
