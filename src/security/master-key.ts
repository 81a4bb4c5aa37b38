import { randomBytes } from 'node:crypto'
import { rmSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { ConfigError } from '../config/load.js'
import type { TotpStore } from '../store/ports/identity.js'
import type { DatabaseTarget } from '../store/postgres/connect.js'
import {
  type Keyring,
  loadOrCreateMasterKeyFile,
  opensWith,
  readMasterKeyFile,
  totpSecretAad,
} from './keyring.js'

/** The master key, and where it came from (for the line that refuses it). */
export interface MasterKey {
  readonly key: Buffer
  /** The setting that names it: `secrets.masterKeyFile (WRITEGATE_MASTER_KEY_FILE)`, or dataDir's. */
  readonly setting: string
  /** Its file; null for `memory://`'s ephemeral key. */
  readonly file: string | null
  /** The embedded default generated it just now. */
  readonly created: boolean
}

const MASTER_KEY_FILE_SETTING = 'secrets.masterKeyFile (WRITEGATE_MASTER_KEY_FILE)'
const DATA_DIR_SETTING = 'dataDir (WRITEGATE_DATA_DIR)'

/**
 * Where the master key comes from:
 * - `secrets.masterKeyFile` when set (a Kubernetes secret, say);
 * - the embedded default generates one beside the PGlite data (`<dataDir>/master.key`);
 * - `memory://` gets an ephemeral key, as ephemeral as its data;
 * - a Postgres server needs the file: replicas must share one key, so a generated
 *   per-process key would silently break tokens and TOTP across replicas.
 */
export function resolveMasterKey(
  file: string | undefined,
  target: DatabaseTarget,
  dataDir: string,
): MasterKey {
  if (file) {
    try {
      return { key: readMasterKeyFile(file), setting: MASTER_KEY_FILE_SETTING, file, created: false }
    } catch (err) {
      throw new ConfigError(`invalid setting ${MASTER_KEY_FILE_SETTING}: ${file}: ${(err as Error).message}`)
    }
  }
  switch (target.kind) {
    case 'pglite-memory':
      return { key: randomBytes(32), setting: MASTER_KEY_FILE_SETTING, file: null, created: false }
    case 'pglite-disk': {
      const path = join(resolve(dataDir), 'master.key')
      try {
        return { ...loadOrCreateMasterKeyFile(path), setting: DATA_DIR_SETTING, file: path }
      } catch (err) {
        const e = err as NodeJS.ErrnoException
        throw new ConfigError(
          `invalid setting ${DATA_DIR_SETTING}: cannot use the generated master key ${path}: ${e.code ?? e.message}`,
        )
      }
    }
    case 'postgres':
      throw new ConfigError(
        `invalid setting ${MASTER_KEY_FILE_SETTING}: required when database.url points at a Postgres server (generate one with \`writegate keygen\`)`,
      )
  }
}

/**
 * The newest enrolments start-up tries: the key in use sealed the newest. One that opens is
 * enough (a key that sealed any stored secret was in use), so a database where a few tenants
 * re-enrolled under another key does not lock out the key that sealed the rest.
 */
export const SEALED_SECRETS_TRIED = 20

/**
 * Start-up: a master key that opens none of the secrets the database holds sealed (TOTP seeds)
 * is not the one they were sealed with, and every TOTP code would fail against it. Refused here,
 * in one line naming the setting, rather than found at the first approval. Nothing stored,
 * nothing to check. A key the embedded default generated just now, over a database that holds
 * sealed secrets, replaced a `master.key` that went missing: it is removed again, so that the
 * next start still asks for the original rather than taking the stray as the key.
 */
export async function checkMasterKeyOpensSecrets(
  keyring: Keyring,
  master: MasterKey,
  totp: Pick<TotpStore, 'newestSecrets'>,
): Promise<void> {
  const stored = await totp.newestSecrets(SEALED_SECRETS_TRIED)
  if (stored.length === 0) return
  if (stored.some((s) => opensWith(keyring, s.secretEnc, totpSecretAad(s.tenantId)))) return
  const lost = 'if it is lost, see secrets.masterKeyFile in docs/configuration.md'
  if (master.created && master.file) {
    rmSync(master.file, { force: true })
    throw new ConfigError(
      `invalid setting ${master.setting}: the master key ${master.file} is missing and the database holds secrets sealed with it (TOTP seeds): put it back; ${lost}`,
    )
  }
  throw new ConfigError(
    `invalid setting ${master.setting}: ${master.file ? `${master.file}: ` : ''}this key did not seal the secrets stored in the database (TOTP seeds): start with the key that did; ${lost}`,
  )
}
