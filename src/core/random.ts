import { randomFillSync } from 'node:crypto'

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz'

/** CSPRNG bytes are drawn in blocks: one system call per 4 KiB instead of one per id. */
const POOL_SIZE = 4096
const pool = Buffer.allocUnsafe(POOL_SIZE)
let offset = POOL_SIZE

function nextByte(): number {
  if (offset === POOL_SIZE) {
    randomFillSync(pool)
    offset = 0
  }
  return pool[offset++] as number
}

/**
 * Uniform base62 string from a CSPRNG. Bytes >= 248 are rejected so every character is
 * equally likely (248 = 62 * 4).
 */
export function randomBase62(length: number): string {
  let out = ''
  while (out.length < length) {
    const b = nextByte()
    if (b < 248) out += BASE62[b % 62]
  }
  return out
}

export function isBase62(s: string): boolean {
  return /^[0-9A-Za-z]+$/.test(s)
}
