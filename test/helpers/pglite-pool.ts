import { PGlite } from '@electric-sql/pglite'
import { migrate } from '../../src/store/migrate.js'
import { type Database, servePglite } from '../../src/store/postgres/connect.js'
import { pgliteTemplate } from './pglite-template.js'

/**
 * Migrated in-memory PGlite engines, reused by the tests of one file (issue 19: shared servers
 * where isolation allows). Loading an engine costs 0.6–2 s of CPU (a 40 MB data directory
 * unpacked into WASM memory) and migrating it 0.15–0.5 s more: half the CPU of the API suites.
 * A closed test database goes back to the pool emptied instead: every table but
 * `schema_migrations` truncated with its identities restarted, the session discarded (prepared
 * statements, settings, locks, temporary tables). An engine whose schema a test changed (a
 * trigger, a function, a column) no longer matches the migrated one and is closed, not reused.
 * An idle engine is closed after a second: Postgres inside it keeps timers (setitimer, as
 * setTimeout) that would hold a finished test file's process open.
 */
const IDLE_MS = 1000
const idle: Array<{ engine: PGlite; timer: NodeJS.Timeout }> = []
let migratedSchema: string | undefined

/** How many engines wait for the next test (for the pool's own test). */
export function idleEngines(): number {
  return idle.length
}

export async function pooledPglite(): Promise<Database> {
  const reused = idle.pop()
  if (reused) clearTimeout(reused.timer)
  const engine = reused?.engine ?? (await PGlite.create('memory://', { loadDataDir: await pgliteTemplate() }))
  let db: Database
  try {
    db = await servePglite(engine, 'pglite-memory', () => giveBack(engine))
  } catch (err) {
    await engine.close().catch(() => {})
    throw err
  }
  if (!reused)
    try {
      await migrate(db.sql)
      migratedSchema ??= await schemaOf(engine)
    } catch (err) {
      await db.close().catch(() => {})
      throw err
    }
  return db
}

async function giveBack(engine: PGlite): Promise<void> {
  try {
    // pglite-socket rolls back the transaction of a client that went away; were one still
    // open, `discard all` would fail (not allowed in a transaction) and the engine be dropped.
    await engine.exec('discard all')
    if ((await schemaOf(engine)) !== migratedSchema) throw new Error('schema changed')
    const { rows } = await engine.query<{ tables: string }>(
      `select string_agg(quote_ident(tablename), ', ') as tables from pg_tables
        where schemaname = 'public' and tablename <> 'schema_migrations'`,
    )
    await engine.exec(`truncate ${rows[0]?.tables} restart identity cascade`)
    const entry = {
      engine,
      timer: setTimeout(() => {
        idle.splice(idle.indexOf(entry), 1)
        engine.close().catch(() => {})
      }, IDLE_MS),
    }
    idle.push(entry)
  } catch {
    await engine.close().catch(() => {})
  }
}

/**
 * Every object a test could add or change, as one string: tables, columns, constraints, indexes,
 * triggers, functions, schemas, roles, extensions, and the migrations recorded as applied.
 */
async function schemaOf(engine: PGlite): Promise<string> {
  const { rows } = await engine.query<{ schema: string }>(`
    select coalesce(string_agg(x, E'\\n' order by x), '') as schema from (
      select 'class ' || n.nspname || '.' || c.relname || ' ' || c.relkind::text as x
        from pg_class c join pg_namespace n on n.oid = c.relnamespace
       where n.nspname not in ('pg_catalog', 'information_schema', 'pg_toast')
      union all
      select 'column ' || c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
             || ' ' || a.attnotnull::text || ' ' || coalesce(pg_get_expr(d.adbin, d.adrelid), '')
        from pg_attribute a
        join pg_class c on c.oid = a.attrelid
        join pg_namespace n on n.oid = c.relnamespace
        left join pg_attrdef d on d.adrelid = a.attrelid and d.adnum = a.attnum
       where n.nspname = 'public' and a.attnum > 0 and not a.attisdropped
      union all
      select 'constraint ' || conrelid::regclass::text || ' ' || conname || ' ' || pg_get_constraintdef(oid)
        from pg_constraint where connamespace = 'public'::regnamespace
      union all
      select 'trigger ' || tgrelid::regclass::text || ' ' || tgname from pg_trigger where not tgisinternal
      union all
      select 'function ' || n.nspname || '.' || p.proname
        from pg_proc p join pg_namespace n on n.oid = p.pronamespace
       where n.nspname not in ('pg_catalog', 'information_schema')
      union all select 'schema ' || nspname from pg_namespace
      union all select 'role ' || rolname from pg_roles
      union all select 'extension ' || extname from pg_extension
      union all select 'migration ' || version || ' ' || name from schema_migrations
    ) objects`)
  return rows[0]?.schema ?? ''
}
