import { readFileSync } from 'node:fs'
import { ConfigError, loadSettings } from '../config/load.js'
import { migrateConfiguredDatabase, openConfiguredDatabase } from '../control/configured-database.js'
import { nowSeconds, systemClock } from '../core/clock.js'
import { parseEd25519PublicKey } from '../core/ed25519.js'
import { ManifestFileError, parseSignedManifest } from '../manifests/manifest-file.js'
import { databaseTarget } from '../store/postgres/connect.js'
import { createManifestStore } from '../store/postgres/manifest-store.js'
import { createTenantStore } from '../store/postgres/tenant-store.js'

const SETTING = 'manifests.scannerPublicKeyFile (WRITEGATE_SCANNER_PUBLIC_KEY_FILE)'

/**
 * `writegate manifests import <file>`: checks the scanner's Ed25519 signature against the
 * configured key, then stores the entries. A bad signature, a bad shape or an unknown
 * tenant stores nothing. Throws with a one-line message.
 */
export async function manifestsImportCommand(file: string, out: (s: string) => void): Promise<void> {
  const settings = loadSettings()
  const keyFile = settings.manifests.scannerPublicKeyFile
  if (!keyFile) throw new ConfigError(`invalid setting ${SETTING}: required to import manifests`)
  let scannerKey: ReturnType<typeof parseEd25519PublicKey>
  try {
    scannerKey = parseEd25519PublicKey(readFileSync(keyFile, 'utf8'))
  } catch (err) {
    const e = err as NodeJS.ErrnoException
    throw new ConfigError(
      `invalid setting ${SETTING}: ${keyFile}: ${e.code && e.syscall ? e.code : e.message}`,
    )
  }
  let text: string
  try {
    text = readFileSync(file, 'utf8')
  } catch (err) {
    throw new Error(`cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? 'error'}`)
  }
  let manifest: ReturnType<typeof parseSignedManifest>
  try {
    manifest = parseSignedManifest(text, scannerKey)
  } catch (err) {
    if (err instanceof ManifestFileError)
      throw new Error(`refused ${file}: ${err.message}; nothing was imported`)
    throw err
  }
  const target = databaseTarget(settings.database.url, settings.dataDir, 1)
  const db = await openConfiguredDatabase(target)
  try {
    await migrateConfiguredDatabase(db, target)
    if (!(await createTenantStore(db.sql).get(manifest.tenantId))) {
      throw new Error(`refused ${file}: unknown tenant ${manifest.tenantId}; nothing was imported`)
    }
    const added = await createManifestStore(db.sql).add(
      manifest.tenantId,
      manifest.entries,
      nowSeconds(systemClock),
    )
    out(
      `imported ${added} of ${manifest.entries.length} manifest entries for ${manifest.tenantId} (${manifest.entries.length - added} already present)\n`,
    )
  } finally {
    await db.close()
  }
}
