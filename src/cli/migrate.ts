import { setTimeout as sleep } from 'node:timers/promises'
import { loadSettings } from '../config/load.js'
import { migrateConfiguredDatabase, openConfiguredDatabase } from '../control/configured-database.js'
import { createLogger } from '../observability/logger.js'
import { type Database, databaseTarget, openDatabase } from '../store/postgres/connect.js'
import { UsageError } from './arguments.js'

/**
 * What a database server says while it is not up yet: no listener, no address, no answer, or
 * Postgres starting. Worth another try while --wait lasts; anything else (a wrong password, a
 * database that does not exist) fails at once.
 */
const NOT_UP_YET = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ETIMEDOUT',
  'CONNECT_TIMEOUT',
  '57P03',
])
const RETRY_MS = 2000

/**
 * `writegate migrate [--wait <seconds>]`: applies the migrations to the configured database and
 * exits. With --wait it keeps trying a server that is not up yet for that long: the chart's Job
 * runs right after a bundled PostgreSQL is created, which can take minutes to start.
 */
export async function migrateCommand(options: Record<string, string | undefined> = {}): Promise<void> {
  const waitSeconds = options.wait === undefined ? 0 : Number(options.wait)
  if (!/^\d+$/.test(options.wait ?? '0') || waitSeconds > 3600)
    throw new UsageError('--wait must be a whole number of seconds, 0 to 3600')
  const settings = loadSettings()
  const logger = createLogger(settings.log.level)
  const target = databaseTarget(settings.database.url, settings.dataDir, 1)
  const deadline = Date.now() + waitSeconds * 1000
  let db: Database | undefined
  while (!db && Date.now() < deadline) {
    try {
      db = await openDatabase(target)
    } catch (err) {
      const code = String((err as { code?: unknown }).code ?? '')
      if (!NOT_UP_YET.has(code)) break
      logger.info({ code }, 'the database is not up yet; trying again')
      await sleep(Math.min(RETRY_MS, Math.max(0, deadline - Date.now())))
    }
  }
  // Once more, through the path that names the setting when it fails.
  db ??= await openConfiguredDatabase(target)
  try {
    const result = await migrateConfiguredDatabase(db, target)
    logger.info({ applied: result.applied, current: result.current, storage: db.kind }, 'migrations applied')
  } finally {
    await db.close()
  }
}
