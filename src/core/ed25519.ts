import { createPrivateKey, createPublicKey, type KeyObject, sign, verify } from 'node:crypto'
import { sha256Hex } from './secret-hash.js'

/**
 * Ed25519 helpers shared by audit checkpoints and scanner manifests. Pure: keys come in
 * as text or KeyObjects; reading files is the caller's job.
 */

/** DER prefix of an Ed25519 SubjectPublicKeyInfo; the raw 32-byte key follows it. */
const SPKI_PREFIX = Buffer.from('302a300506032b6570032100', 'hex')

export function isEd25519(key: KeyObject): boolean {
  return key.asymmetricKeyType === 'ed25519'
}

/** A PEM (SPKI) public key, or the raw 32-byte key as base64. Throws on anything else. */
export function parseEd25519PublicKey(text: string): KeyObject {
  const trimmed = text.trim()
  let key: KeyObject
  if (trimmed.startsWith('-----BEGIN')) {
    key = createPublicKey(trimmed)
  } else {
    const raw = decodeStrictBase64(trimmed)
    if (raw?.length !== 32) throw new Error('expected a PEM public key or 32 bytes of base64')
    key = createPublicKey({ key: Buffer.concat([SPKI_PREFIX, raw]), format: 'der', type: 'spki' })
  }
  if (!isEd25519(key)) throw new Error(`expected an Ed25519 key, got ${key.asymmetricKeyType ?? 'unknown'}`)
  return key
}

/** A PEM PKCS#8 Ed25519 private key. */
export function parseEd25519PrivateKey(pem: string): KeyObject {
  const key = createPrivateKey(pem)
  if (!isEd25519(key)) throw new Error(`expected an Ed25519 key, got ${key.asymmetricKeyType ?? 'unknown'}`)
  return key
}

/** The raw 32-byte public key. */
export function rawPublicKey(key: KeyObject): Buffer {
  const pub = key.type === 'private' ? createPublicKey(key) : key
  return (pub.export({ format: 'der', type: 'spki' }) as Buffer).subarray(SPKI_PREFIX.length)
}

export function publicKeyPem(key: KeyObject): string {
  const pub = key.type === 'private' ? createPublicKey(key) : key
  return pub.export({ format: 'pem', type: 'spki' }).toString()
}

/** Short, stable name of a public key: the first 16 hex digits of SHA-256 of its raw bytes. */
export function publicKeyId(key: KeyObject): string {
  return sha256Hex(rawPublicKey(key)).slice(0, 16)
}

export function signEd25519(privateKey: KeyObject, message: Uint8Array): string {
  return sign(null, message, privateKey).toString('base64')
}

/** False for a bad signature and for a signature that is not canonical base64 of 64 bytes. */
export function verifyEd25519(publicKey: KeyObject, message: Uint8Array, signature: string): boolean {
  const sig = decodeStrictBase64(signature)
  if (sig?.length !== 64) return false
  try {
    return verify(null, message, publicKey, sig)
  } catch {
    return false
  }
}

/**
 * Base64 that decodes and re-encodes to the same text. Node's decoder skips stray
 * characters and ignores trailing bits, so without this two different strings could
 * carry one signature, and an edited byte could go unnoticed.
 */
export function decodeStrictBase64(text: string): Buffer | null {
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(text) || text.length % 4 !== 0) return null
  const buf = Buffer.from(text, 'base64')
  return buf.toString('base64') === text ? buf : null
}
