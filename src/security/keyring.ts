import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto'
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { dirname } from 'node:path'
import { makeDirectory } from '../node-fs/make-directory.js'

/**
 * Keys derived from one 32-byte master key that never lives in the database.
 * - tokenSigning: HMAC-SHA256 key for ALLOW tokens;
 * - atRest: AES-256-GCM key for secrets that must be recoverable (TOTP seeds).
 */
export interface Keyring {
  readonly tokenSigning: Buffer
  readonly atRest: Buffer
}

export function deriveKeyring(master: Buffer): Keyring {
  if (master.length !== 32) throw new Error('master key must be 32 bytes')
  const derive = (info: string) => Buffer.from(hkdfSync('sha256', master, Buffer.alloc(0), info, 32))
  return { tokenSigning: derive('writegate/allow-token/v1'), atRest: derive('writegate/at-rest/v1') }
}

/**
 * Accepts 32 raw bytes, or 32 bytes as base64 or hex text (as Kubernetes secrets usually hold
 * them). Refuses one byte repeated (found in review: 32 zero bytes were taken as the key every
 * token and sealed secret hangs on). 32 printable characters are taken as they are: `openssl rand
 * -base64 24` written without a newline is that, and refusing a key in use would lock its
 * sealed secrets away.
 */
export function parseMasterKey(data: Buffer): Buffer {
  if (data.length === 32) return notConstant(data)
  const text = data.toString('utf8').trim()
  if (/^[0-9a-fA-F]{64}$/.test(text)) return notConstant(Buffer.from(text, 'hex'))
  const b64 = Buffer.from(text, 'base64')
  if (b64.length === 32 && /^[A-Za-z0-9+/=_-]+$/.test(text)) return notConstant(b64)
  throw new Error('expected 32 bytes, as raw bytes, 64 hex characters or base64')
}

function notConstant(key: Buffer): Buffer {
  if (key.every((b) => b === key[0]))
    throw new Error('the key is one byte repeated, not random: write 32 random bytes (writegate keygen)')
  return key
}

export function readMasterKeyFile(path: string): Buffer {
  return parseMasterKey(readFileSync(path))
}

/**
 * The embedded default: create the key beside the PGlite data on first start, then reuse it.
 * `created` says this call wrote it (start-up takes it back if the database holds secrets sealed
 * with the one it replaces).
 */
export function loadOrCreateMasterKeyFile(path: string): { key: Buffer; created: boolean } {
  if (existsSync(path)) return { key: readMasterKeyFile(path), created: false }
  makeDirectory(dirname(path), 0o700)
  const key = randomBytes(32)
  writeFileSync(path, `${key.toString('base64')}\n`, { mode: 0o600, flag: 'wx' })
  return { key, created: true }
}

/** AES-256-GCM envelope: `v1.<iv>.<ciphertext>.<tag>` in base64url. */
export function sealSecret(keyring: Keyring, plaintext: string, aad: string): string {
  const iv = randomBytes(12)
  const cipher = createCipheriv('aes-256-gcm', keyring.atRest, iv)
  cipher.setAAD(Buffer.from(aad))
  const ct = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()])
  return ['v1', iv, ct, cipher.getAuthTag()]
    .map((p) => (typeof p === 'string' ? p : p.toString('base64url')))
    .join('.')
}

/** What a tenant's TOTP secret is sealed under (`aad`): it opens in that tenant's row only. */
export function totpSecretAad(tenantId: string): string {
  return `totp:${tenantId}`
}

/**
 * `aad` binds the ciphertext to its owner: a sealed value copied to another tenant's row will not
 * open. Throws when it does not open: sealed under another master key, or not a sealed value.
 */
export function openSecret(keyring: Keyring, sealed: string, aad: string): string {
  const [v, iv, ct, tag] = sealed.split('.')
  if (v !== 'v1' || !iv || !ct || !tag) throw new Error('unrecognised sealed secret')
  const decipher = createDecipheriv('aes-256-gcm', keyring.atRest, Buffer.from(iv, 'base64url'))
  decipher.setAAD(Buffer.from(aad))
  decipher.setAuthTag(Buffer.from(tag, 'base64url'))
  return Buffer.concat([decipher.update(Buffer.from(ct, 'base64url')), decipher.final()]).toString('utf8')
}

/** Whether `sealed` opens with this keyring (see `openSecret`). */
export function opensWith(keyring: Keyring, sealed: string, aad: string): boolean {
  try {
    openSecret(keyring, sealed, aad)
    return true
  } catch {
    return false
  }
}
