import { writeFileSync } from 'node:fs'
import { parseEd25519PrivateKey, publicKeyId, rawPublicKey } from '../core/ed25519.js'
import { newAuditSigningKeyPem } from '../security/audit-signing-key.js'

/**
 * `writegate audit-keygen <file>`: a new checkpoint signing key. Writes the private key
 * (PEM PKCS#8, mode 0600, never overwriting) and `<file>.pub` (PEM SPKI), and prints the
 * public key, which verifiers should keep somewhere writegate's database is not.
 */
export function auditKeygenCommand(file: string | undefined, out: (s: string) => void): void {
  if (!file) throw new Error('audit-keygen needs an output file: writegate audit-keygen <file>')
  const { privatePem, publicPem } = newAuditSigningKeyPem()
  writeFileSync(file, privatePem, { mode: 0o600, flag: 'wx' })
  writeFileSync(`${file}.pub`, publicPem, { mode: 0o644, flag: 'wx' })
  const key = parseEd25519PrivateKey(privatePem)
  out(
    `wrote the audit signing key to ${file} (set audit.signingKeyFile / WRITEGATE_AUDIT_SIGNING_KEY_FILE)\n` +
      `wrote its public key to ${file}.pub (for writegate verify --public-key)\n` +
      `key id ${publicKeyId(key)}, raw public key (base64) ${rawPublicKey(key).toString('base64')}\n${publicPem}`,
  )
}
