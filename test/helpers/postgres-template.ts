import { createHash } from 'node:crypto'
import type { Sql } from 'postgres'
import { migrate } from '../../src/store/migrate.js'
import { MIGRATIONS } from '../../src/store/migrations/index.js'
import { openDatabase } from '../../src/store/postgres/connect.js'
import { TEST_DATABASE_URL } from './servers.js'

/** Held (per session) by the one test process that builds the template; the others wait on it. */
const BUILD_LOCK = 7_245_102

/**
 * A migrated database on the test server, named by the migrations it holds, from which each
 * test's database is created (`create database … template`): a copy costs what an empty database
 * does, where migrating each one cost 0.1–0.3 s more. Built once per server and set of
 * migrations, by whichever test process gets there first, through the same `migrate` as
 * production; like template0 it takes no connections, so no session (autovacuum included) can
 * hold it open while a test copies it.
 */
export async function migratedTemplate(admin: Sql): Promise<string> {
  const tag = createHash('sha256')
    .update(JSON.stringify(MIGRATIONS.map((m) => [m.version, m.name, m.up])))
    .digest('hex')
    .slice(0, 16)
  const name = `wgt_template_${tag}`
  const building = `${name}_building`
  await admin`select pg_advisory_lock(${BUILD_LOCK})`
  try {
    if ((await admin`select 1 from pg_database where datname = ${name}`).length > 0) return name
    // A builder that died half-way left its copy: start again.
    await admin.unsafe(`drop database if exists ${building} with (force)`)
    await admin.unsafe(`create database ${building}`)
    const url = new URL(TEST_DATABASE_URL)
    url.pathname = `/${building}`
    const db = await openDatabase({ kind: 'postgres', url: url.toString(), maxConnections: 1 })
    try {
      await migrate(db.sql)
    } finally {
      await db.close()
    }
    await admin.unsafe(`alter database ${building} rename to ${name}`)
    await admin.unsafe(`alter database ${name} with is_template true allow_connections false`)
    return name
  } finally {
    await admin`select pg_advisory_unlock(${BUILD_LOCK})`
  }
}
