import { hash, timingSafeEqual } from 'node:crypto'

/**
 * High-entropy secrets (API keys, sponsor and badge tokens, invite codes) are stored
 * only as SHA-256. A slow hash buys nothing for 190+ bits of entropy; short secrets
 * (backup codes) use a salted slow hash instead (see backup-codes.ts).
 */
export function sha256Hex(input: string | Uint8Array): string {
  // One-shot: no Hash object per call (every receipt is hashed once on its way into the chain).
  return hash('sha256', input, 'hex')
}

export function hashSecret(secret: string): string {
  return sha256Hex(secret)
}

/** Constant-time comparison of two hex digests of equal length. */
export function digestsEqual(a: string, b: string): boolean {
  const ab = Buffer.from(a, 'utf8')
  const bb = Buffer.from(b, 'utf8')
  if (ab.length !== bb.length) return false
  return timingSafeEqual(ab, bb)
}
