import t from 'tap'
import { openDatabase } from '../../src/store/postgres/connect.js'
import { openTestDatabase } from '../helpers/backends.js'
import { startControlPlane } from '../helpers/control-plane.js'
import { capturingLogger } from '../helpers/proxy.js'
import { startTcpRelay } from '../helpers/tcp-relay.js'
import { sleep } from '../helpers/wait.js'

/**
 * A Postgres connection that stays open but never answers again (a frozen peer, a broken
 * middlebox) held the group commit for good: every later check waited its deadline and was
 * answered 503, /readyz said ready, and only a restart cleared it (found in review). A request
 * whose reply is overdue now has its connection cut; the driver fails what it held and opens a
 * new one.
 */
t.test('connections that stop answering are cut at the reply deadline; checks recover', async (t) => {
  const real = await openTestDatabase('postgres')
  t.teardown(() => real.close())
  const relay = await startTcpRelay(t, new URL(real.url as string), 5432)
  const db = await openDatabase({ kind: 'postgres', url: relay.url, maxConnections: 4, replyDeadlineMs: 500 })
  const { logger, lines } = capturingLogger()
  const { api } = await startControlPlane(t, 'postgres', {
    db: { db, url: relay.url, close: () => db.close() },
    settings: { server: { handlerTimeoutMs: 1000 } },
    logger,
  })
  const tenant = await api.newTenant()
  const check = () => api.post('/v1/check', { verb: 'verify' }, { bearer: tenant.apiKey })
  t.equal((await check()).status, 200)

  // Healthy and idle (a LISTEN connection among them): nothing is outstanding, nothing is cut.
  await sleep(2500)
  t.equal((await check()).status, 200)
  const overdue = () => lines.filter((l) => /a reply is overdue/.test(String(l.msg)))
  t.same(overdue(), [], 'an idle connection is never cut')

  // Every connection of the pool open (a burst of checks), then all of them frozen.
  await Promise.all(Array.from({ length: 12 }, () => check()))
  relay.freezeOpen()
  // Bounded, not timed: before the fix no check succeeded again, however long this ran.
  let status = 0
  const statuses: number[] = []
  for (let i = 0; i < 40 && status !== 200; i++) {
    status = (await check()).status
    statuses.push(status)
    if (status !== 200) await sleep(250)
  }
  t.equal(status, 200, `a check succeeds again on a new connection (answers: ${statuses.join(' ')})`)
  t.ok(overdue().length >= 1, 'each cut is logged as a warning')
  t.ok(
    overdue().every((l) => (l.overdueMs as number) >= 500),
    'each past the deadline',
  )
})

/**
 * The first run of a statement with parameters on a connection goes out as Parse, Describe and
 * Flush, with no Sync; a watchdog that waited only for ReadyForQuery never saw it (found in
 * review). Each kind of request, on a connection frozen just before it, is cut at the deadline.
 */
t.test('the driver: every kind of request on a frozen connection is cut', async (t) => {
  const real = await openTestDatabase('postgres')
  t.teardown(() => real.close())
  const relay = await startTcpRelay(t, new URL(real.url as string), 5432)
  const db = await openDatabase({ kind: 'postgres', url: relay.url, maxConnections: 1, replyDeadlineMs: 300 })
  t.teardown(() => db.close())
  const cuts: unknown[] = []
  db.watchReplies((info) => cuts.push(info))
  const settled = (q: Promise<unknown>) =>
    Promise.race([
      q.then(
        () => 'answered',
        (err: { code?: string }) => `failed ${err.code ?? ''}`,
      ),
      sleep(15_000).then(() => 'still waiting'),
    ])
  const withParameter = () => db.sql`select ${1}::int as x`
  // Each on a fresh connection (the last one's was cut), warmed as the kind needs, then frozen.
  const kinds: [string, () => Promise<unknown>, () => Promise<unknown>][] = [
    ['a first run with parameters (Parse, Describe, Flush)', () => db.sql`select 1`, withParameter],
    ['a prepared run (Bind, Execute, Sync)', withParameter, withParameter],
    ['a simple query', () => db.sql`select 1`, () => db.sql`select 2 as y`.simple()],
  ]
  for (const [kind, warm, run] of kinds) {
    await warm()
    relay.freezeOpen()
    const before = cuts.length
    t.equal(await settled(run()), 'failed CONNECTION_CLOSED', `${kind}: failed with its connection`)
    t.equal(cuts.length, before + 1, `${kind}: one cut`)
  }
  t.equal(await settled(db.sql`select 3 as z`), 'answered', 'a new connection answers')
})
