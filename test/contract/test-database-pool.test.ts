import t from 'tap'
import { openTestDatabase } from '../helpers/backends.js'
import { idleEngines } from '../helpers/pglite-pool.js'

/**
 * The in-memory PGlite databases the tests get are reused engines (helpers/pglite-pool.ts): each
 * must look exactly like a freshly migrated database, whatever the test before it left behind.
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
