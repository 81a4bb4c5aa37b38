import { loadSettings } from '../config/load.js'
import { migrateConfiguredDatabase, openConfiguredDatabase } from '../control/control-plane.js'
import { createLogger } from '../observability/logger.js'
import { databaseTarget } from '../store/postgres/connect.js'

/** `writegate migrate`: applies the migrations to the configured database and exits. */
export async function migrateCommand(): Promise<void> {
  const settings = loadSettings()
  const logger = createLogger(settings.log.level)
  const target = databaseTarget(settings.database.url, settings.dataDir, 1)
  const db = await openConfiguredDatabase(target)
  try {
    const result = await migrateConfiguredDatabase(db, target)
    logger.info({ applied: result.applied, current: result.current, storage: db.kind }, 'migrations applied')
  } finally {
    await db.close()
  }
}
