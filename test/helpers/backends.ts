import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import { randomBase62 } from '../../src/core/random.js'
import { migrate } from '../../src/store/migrate.js'
import { type Database, type DatabaseKind, openDatabase } from '../../src/store/postgres/connect.js'
import { pooledPglite } from './pglite-pool.js'
import { pgliteTemplate } from './pglite-template.js'
import { migratedTemplate } from './postgres-template.js'
import { TEST_DATABASE_URL, unreachable } from './servers.js'

export const ALL_BACKENDS: readonly DatabaseKind[] = ['pglite-memory', 'pglite-disk', 'postgres']
/** API suites run on the embedded default and on a real server. */
export const API_BACKENDS: readonly DatabaseKind[] = ['pglite-memory', 'postgres']

export interface TestDatabase {
  db: Database
  /** Connection URL, for a second process or instance on the same database (real Postgres only). */
  url: string | null
  close(): Promise<void>
}

/**
 * A fresh, migrated database of the given kind. Real Postgres gets a new database per call, a
 * copy of a migrated template (postgres-template.ts); in-memory PGlite, an engine an earlier
 * test of the file closed, emptied (pglite-pool.ts).
 */
export async function openTestDatabase(
  kind: DatabaseKind,
  opts: { migrate?: boolean } = {},
): Promise<TestDatabase> {
  let result: TestDatabase
  if (kind === 'pglite-memory' && opts.migrate !== false) {
    // Migrated, and emptied by the last test that closed it (pglite-pool.ts).
    const db = await pooledPglite()
    return { db, url: null, close: () => db.close() }
  }
  if (kind === 'pglite-memory') {
    const db = await openDatabase({ kind: 'pglite-memory', initialState: await pgliteTemplate() })
    result = { db, url: null, close: () => db.close() }
  } else if (kind === 'pglite-disk') {
    const dir = mkdtempSync(join(tmpdir(), 'writegate-test-'))
    const db = await openDatabase({ kind: 'pglite-disk', dir, initialState: await pgliteTemplate() })
    result = {
      db,
      url: null,
      async close() {
        await db.close()
        rmSync(dir, { recursive: true, force: true })
      },
    }
  } else {
    result = await freshPostgres(opts.migrate !== false)
  }
  if (opts.migrate !== false) await migrate(result.db.sql)
  return result
}

async function freshPostgres(migrated: boolean): Promise<TestDatabase> {
  const admin = postgres(TEST_DATABASE_URL, { max: 1, onnotice: () => {}, connect_timeout: 5 })
  const name = `wgt_${randomBase62(12).toLowerCase()}`
  try {
    // A copy of the migrated template (postgres-template.ts); migrate() then finds nothing to do.
    const template = migrated ? ` template ${await migratedTemplate(admin)}` : ''
    await admin.unsafe(`create database ${name}${template}`)
  } catch (err) {
    await admin.end({ timeout: 1 })
    throw unreachable('PostgreSQL', TEST_DATABASE_URL, err)
  }
  const url = new URL(TEST_DATABASE_URL)
  url.pathname = `/${name}`
  const db = await openDatabase({ kind: 'postgres', url: url.toString(), maxConnections: 10 })
  return {
    db,
    url: url.toString(),
    async close() {
      await db.close()
      await admin.unsafe(`drop database if exists ${name} with (force)`)
      await admin.end({ timeout: 1 })
    },
  }
}
