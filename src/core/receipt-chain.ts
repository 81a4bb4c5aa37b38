import { canonicalJson } from './jcs.js'
import { sha256Hex } from './secret-hash.js'

/** prevHash of the first receipt in every tenant's chain. */
export const GENESIS_HASH = '0'.repeat(64)

/**
 * hash = sha256hex(prevHash + "\n" + JCS(receipt without hash)) (contract §5).
 * `body` is the receipt without its `hash` field; it already holds `prevHash`.
 */
export function chainHash(prevHash: string, body: Record<string, unknown>): string {
  return chainHashOfText(prevHash, canonicalJson(body))
}

/** chainHash for a body already in canonical form (the append stores that same text). */
export function chainHashOfText(prevHash: string, canonicalText: string): string {
  return sha256Hex(`${prevHash}\n${canonicalText}`)
}

/** Canonical text of a receipt body, as stored and as hashed. */
export function canonicalBody(body: Record<string, unknown>): string {
  return canonicalJson(body)
}
