import { ConfigError } from '../config/load.js'
import { migrate } from '../store/migrate.js'
import { type Database, type DatabaseTarget, openDatabase } from '../store/postgres/connect.js'

/**
 * A backing server that cannot be used at start-up: one line naming the setting. A server's own
 * refusal (Postgres: `database "x" does not exist`; Redis: `WRONGPASS …`) is quoted, because its
 * code alone (3D000) tells an operator nothing; neither ever holds the URL's password.
 */
export function unreachable(setting: string, err: Error, failure = 'cannot connect'): ConfigError {
  const e = err as NodeJS.ErrnoException
  const line = (e.message || 'error').split('\n')[0]
  if (e.name === 'PostgresError' || e.name === 'ReplyError')
    return new ConfigError(`invalid setting ${setting}: ${failure}: ${line}`)
  return new ConfigError(`invalid setting ${setting}: ${failure} (${e.code ?? line})`)
}

function databaseSetting(target: DatabaseTarget): string {
  return target.kind === 'pglite-disk'
    ? 'dataDir (WRITEGATE_DATA_DIR)'
    : 'database.url (WRITEGATE_DATABASE_URL)'
}

/**
 * Opens the configured database. One that cannot be opened (at start-up, or for `writegate
 * migrate`) is blamed on the setting in use: `database.url` when one is set (a server, or
 * `memory://`), `dataDir` for the embedded PGlite under it.
 */
export function openConfiguredDatabase(target: DatabaseTarget): Promise<Database> {
  return openDatabase(target).catch((err: Error) => {
    throw unreachable(
      databaseSetting(target),
      err,
      target.kind === 'pglite-disk' ? `cannot open the embedded database in ${target.dir}` : undefined,
    )
  })
}

/** Applies the migrations; a database that refuses them (a role without CREATE, say) is blamed the same way. */
export function migrateConfiguredDatabase(db: Database, target: DatabaseTarget): ReturnType<typeof migrate> {
  return migrate(db.sql).catch((err: Error) => {
    throw unreachable(databaseSetting(target), err, 'cannot apply the migrations')
  })
}
