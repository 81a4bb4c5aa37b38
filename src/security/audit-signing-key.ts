import { generateKeyPairSync, type KeyObject } from 'node:crypto'
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { ConfigError } from '../config/load.js'
import { parseEd25519PrivateKey } from '../core/ed25519.js'
import { makeDirectory } from '../node-fs/make-directory.js'
import type { DatabaseTarget } from '../store/postgres/connect.js'

const SETTING = 'audit.signingKeyFile (WRITEGATE_AUDIT_SIGNING_KEY_FILE)'

/** A new Ed25519 key pair as PEM: PKCS#8 private, SPKI public. */
export function newAuditSigningKeyPem(): { privatePem: string; publicPem: string } {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519')
  return {
    privatePem: privateKey.export({ format: 'pem', type: 'pkcs8' }).toString(),
    publicPem: publicKey.export({ format: 'pem', type: 'spki' }).toString(),
  }
}

function readKeyFile(file: string): KeyObject {
  try {
    return parseEd25519PrivateKey(readFileSync(file, 'utf8'))
  } catch (err) {
    const e = err as NodeJS.ErrnoException
    const why = e.code && e.syscall ? e.code : 'not a PEM PKCS#8 Ed25519 private key'
    throw new ConfigError(`invalid setting ${SETTING}: ${file}: ${why}`)
  }
}

/**
 * The key that signs audit checkpoints. Like the master key, it never lives in the
 * database it vouches for:
 * - `audit.signingKeyFile` when set (a Kubernetes secret, say);
 * - the embedded default generates one beside the PGlite data (`<dataDir>/audit-signing.pem`);
 * - `memory://` gets an ephemeral key, as ephemeral as its data;
 * - a Postgres server needs the file: replicas must sign with one key, or checkpoints
 *   made by one replica would not verify on another.
 */
export function resolveAuditSigningKey(
  file: string | undefined,
  target: DatabaseTarget,
  dataDir: string,
): KeyObject {
  if (file) return readKeyFile(file)
  switch (target.kind) {
    case 'pglite-memory':
      return generateKeyPairSync('ed25519').privateKey
    case 'pglite-disk': {
      const path = join(resolve(dataDir), 'audit-signing.pem')
      try {
        if (!existsSync(path)) {
          makeDirectory(dirname(path), 0o700)
          writeFileSync(path, newAuditSigningKeyPem().privatePem, { mode: 0o600, flag: 'wx' })
        }
        return readKeyFile(path)
      } catch (err) {
        // The generated key is the data directory's: blame that setting, not the key file's.
        const e = err as NodeJS.ErrnoException
        throw new ConfigError(
          `invalid setting dataDir (WRITEGATE_DATA_DIR): cannot use the generated audit signing key ${path}: ${e.code ?? e.message.replace(/^invalid setting [^:]*: /, '')}`,
        )
      }
    }
    case 'postgres':
      throw new ConfigError(
        `invalid setting ${SETTING}: required when database.url points at a Postgres server (generate one with \`writegate audit-keygen <file>\`)`,
      )
  }
}
