import { randomBytes } from 'node:crypto'
import { join, resolve } from 'node:path'
import { ConfigError } from '../config/load.js'
import type { DatabaseTarget } from '../store/postgres/connect.js'
import { loadOrCreateMasterKeyFile, readMasterKeyFile } from './keyring.js'

/**
 * Where the master key comes from:
 * - `secrets.masterKeyFile` when set (a Kubernetes secret, say);
 * - the embedded default generates one beside the PGlite data (`<dataDir>/master.key`);
 * - `memory://` gets an ephemeral key, as ephemeral as its data;
 * - a Postgres server needs the file: replicas must share one key, so a generated
 *   per-process key would silently break tokens and TOTP across replicas.
 */
export function resolveMasterKey(file: string | undefined, target: DatabaseTarget, dataDir: string): Buffer {
  if (file) {
    try {
      return readMasterKeyFile(file)
    } catch (err) {
      throw new ConfigError(
        `invalid setting secrets.masterKeyFile (WRITEGATE_MASTER_KEY_FILE): ${file}: ${(err as Error).message}`,
      )
    }
  }
  switch (target.kind) {
    case 'pglite-memory':
      return randomBytes(32)
    case 'pglite-disk': {
      const path = join(resolve(dataDir), 'master.key')
      try {
        return loadOrCreateMasterKeyFile(path)
      } catch (err) {
        const e = err as NodeJS.ErrnoException
        throw new ConfigError(
          `invalid setting dataDir (WRITEGATE_DATA_DIR): cannot use the generated master key ${path}: ${e.code ?? e.message}`,
        )
      }
    }
    case 'postgres':
      throw new ConfigError(
        'invalid setting secrets.masterKeyFile (WRITEGATE_MASTER_KEY_FILE): required when database.url points at a Postgres server (generate one with `writegate keygen`)',
      )
  }
}
