import postgres from 'postgres'
import t from 'tap'
import { MIGRATIONS } from '../../src/store/migrations/index.js'
import { openTestDatabase } from '../helpers/backends.js'
import { idleEngines } from '../helpers/pglite-pool.js'
import { TEST_DATABASE_URL } from '../helpers/servers.js'

/**
 * What the tests' databases are made from. In-memory PGlite databases are reused engines
 * (helpers/pglite-pool.ts): each must look exactly like a freshly migrated database, whatever the
 * test before it left behind. Postgres ones are copies of a migrated template
 * (helpers/postgres-template.ts).
 */
async function writeSome(sql: Awaited<ReturnType<typeof openTestDatabase>>['db']['sql']) {
  await sql`insert into tenants (id, name, created_at, sponsor_hash) values ('tnt_a', 'a', 1, 'h')`
  await sql`insert into principals (id, tenant_id, name, created_at) values ('prn_1', 'tnt_a', 'p', 1), ('prn_2', 'tnt_a', 'q', 1)`
}

t.test('a closed database comes back empty, identities restarted, to the next test', async (t) => {
  const first = await openTestDatabase('pglite-memory')
  await writeSome(first.db.sql)
  await first.close()
  t.equal(idleEngines(), 1, 'the engine waits for the next test')
  const second = await openTestDatabase('pglite-memory')
  t.equal(idleEngines(), 0, 'and the next test gets it')
  t.teardown(() => second.close())
  const sql = second.db.sql
  t.same(await sql`select id from tenants`, [], 'no rows from the test before')
  await writeSome(sql)
  t.same(
    (await sql<{ created_order: number }[]>`select created_order from principals order by 1`).map(
      (r) => r.created_order,
    ),
    [1, 2],
    'identity columns start again at 1',
  )
  t.ok(
    (await sql<{ n: number }[]>`select count(*)::int as n from schema_migrations`)[0]!.n > 0,
    'the migrations stay recorded',
  )
})

t.test('session state does not carry over: settings, an open transaction', async (t) => {
  const first = await openTestDatabase('pglite-memory')
  await first.db.sql`set statement_timeout = 1234`
  const reserved = await first.db.sql.reserve()
  await reserved`begin`
  await reserved`insert into tenants (id, name, created_at, sponsor_hash) values ('tnt_b', 'b', 1, 'h')`
  // The connection goes away mid-transaction, as a crashed test's would.
  reserved.release()
  await first.close()
  t.equal(idleEngines(), 1, 'kept: its session was rolled back when the connection went (pglite-socket)')
  const second = await openTestDatabase('pglite-memory')
  t.teardown(() => second.close())
  const sql = second.db.sql
  t.same(await sql`show statement_timeout`, [{ statement_timeout: '0' }], 'settings are the defaults')
  t.same(await sql`select id from tenants`, [], 'the uncommitted row is gone')
  await writeSome(sql)
  t.pass('the engine takes new transactions')
})

t.test('an engine whose schema a test changed is dropped, not reused', async (t) => {
  const first = await openTestDatabase('pglite-memory')
  await first.db
    .sql`create function refuse() returns trigger language plpgsql as $$ begin raise exception 'no'; end $$`
  await first.db
    .sql`create trigger refuse_tenants before insert on tenants for each row execute function refuse()`
  await first.close()
  t.equal(idleEngines(), 0, 'nothing kept')
  const second = await openTestDatabase('pglite-memory')
  t.teardown(() => second.close())
  await writeSome(second.db.sql)
  t.same(await second.db.sql`select tgname from pg_trigger where not tgisinternal`, [], 'no trigger')
})

t.test(
  'Postgres test databases are copies of one migrated template, which takes no connections',
  async (t) => {
    // Several at once, as three test files starting together would.
    const dbs = await Promise.all([1, 2, 3].map(() => openTestDatabase('postgres')))
    t.teardown(() => Promise.all(dbs.map((d) => d.close())))
    for (const d of dbs) {
      const versions = await d.db.sql<{ version: number }[]>`select version from schema_migrations order by 1`
      t.same(
        versions.map((r) => r.version),
        MIGRATIONS.map((m) => m.version),
        'every migration recorded',
      )
      t.same(await d.db.sql`select id from tenants`, [], 'and no rows')
    }
    const admin = postgres(TEST_DATABASE_URL, { max: 1, onnotice: () => {} })
    t.teardown(() => admin.end({ timeout: 1 }))
    const templates = await admin<{ datname: string; datallowconn: boolean; datistemplate: boolean }[]>`
    select datname, datallowconn, datistemplate from pg_database where datname like 'wgt\\_template\\_%'`
    const current = templates.filter((d) => !d.datname.endsWith('_building'))
    t.ok(current.length >= 1, 'the template exists')
    t.ok(
      current.every((d) => d.datistemplate && !d.datallowconn),
      'marked a template, closed to connections',
    )
  },
)
