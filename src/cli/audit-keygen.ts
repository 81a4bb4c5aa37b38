import { parseEd25519PrivateKey, publicKeyId, rawPublicKey } from '../core/ed25519.js'
import { newAuditSigningKeyPem } from '../security/audit-signing-key.js'
import { writeNewKeyFiles } from './new-key-file.js'

/**
 * `writegate audit-keygen <file>`: a new checkpoint signing key. Writes the private key
 * (PEM PKCS#8, mode 0600, never overwriting) and `<file>.pub` (PEM SPKI), and prints the
 * public key, which verifiers should keep somewhere writegate's database is not.
 */
export function auditKeygenCommand(file: string, out: (s: string) => void): void {
  const { privatePem, publicPem } = newAuditSigningKeyPem()
  writeNewKeyFiles([
    { path: file, data: privatePem, mode: 0o600 },
    { path: `${file}.pub`, data: publicPem, mode: 0o644 },
  ])
  const key = parseEd25519PrivateKey(privatePem)
  out(
    `wrote the audit signing key to ${file} (set audit.signingKeyFile / WRITEGATE_AUDIT_SIGNING_KEY_FILE)\n` +
      `wrote its public key to ${file}.pub (for writegate verify --public-key)\n` +
      `key id ${publicKeyId(key)}, raw public key (base64) ${rawPublicKey(key).toString('base64')}\n${publicPem}`,
  )
}
