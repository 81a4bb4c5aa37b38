import type { Sql } from 'postgres'
import { MIGRATIONS, type Migration } from './migrations/index.js'

/** Serialises concurrent migrators (several replicas starting at once). */
const MIGRATION_LOCK = 7_245_101

export interface MigrationResult {
  applied: number[]
  current: number
}

export async function migrate(
  sql: Sql,
  migrations: readonly Migration[] = MIGRATIONS,
): Promise<MigrationResult> {
  return sql.begin(async (tx) => {
    await tx`select pg_advisory_xact_lock(${MIGRATION_LOCK})`
    await tx`create table if not exists schema_migrations (
      version int primary key,
      name text not null,
      applied_at bigint not null
    )`
    const rows = await tx<{ version: number }[]>`select version from schema_migrations`
    const done = new Set(rows.map((r) => r.version))
    const known = new Set(migrations.map((m) => m.version))
    const unknown = [...done].filter((v) => !known.has(v))
    if (unknown.length > 0) {
      throw new Error(`database schema is newer than this build (unknown migration ${Math.max(...unknown)})`)
    }
    const applied: number[] = []
    for (const m of migrations) {
      if (done.has(m.version)) continue
      await tx.unsafe(m.up)
      await tx`insert into schema_migrations (version, name, applied_at)
               values (${m.version}, ${m.name}, ${Math.floor(Date.now() / 1000)})`
      applied.push(m.version)
    }
    return { applied, current: Math.max(0, ...migrations.map((m) => m.version)) }
  }) as Promise<MigrationResult>
}
