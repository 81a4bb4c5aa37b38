import postgres from 'postgres'
import t from 'tap'
import { newId } from '../../src/core/ids.js'
import { openDatabase } from '../../src/store/postgres/connect.js'
import { isDatabaseUnavailable } from '../../src/store/postgres/database-unavailable.js'
import { openTestDatabase } from '../helpers/backends.js'

/**
 * A replica that froze, or lost its network, inside a transaction keeps that transaction's row
 * locks until Postgres learns the client is gone: with Postgres's default keepalives, hours.
 * The locks include a tenant's audit head, which every append of that tenant waits for, on
 * every replica. writegate's sessions ask Postgres to end a transaction left idle.
 */
t.test('a transaction a frozen replica left open does not hold its locks for long', async (t) => {
  const tdb = await openTestDatabase('postgres')
  t.teardown(() => tdb.close())
  const url = tdb.url as string

  const standard = await openDatabase({ kind: 'postgres', url, maxConnections: 1 })
  const [setting] = await standard.sql<
    { v: string }[]
  >`select current_setting('idle_in_transaction_session_timeout') as v`
  t.equal(setting?.v, '30s', 'by default Postgres ends one after 30 s idle')
  await standard.close()

  const frozenReplica = await openDatabase({
    kind: 'postgres',
    url,
    maxConnections: 2,
    idleInTransactionMs: 300,
  })
  t.teardown(() => frozenReplica.close())
  const tenantId = newId('tenant')
  await frozenReplica.sql`insert into audit_heads (tenant_id, seq, hash) values (${tenantId}, 0, 'genesis')`

  let locked!: () => void
  const headLocked = new Promise<void>((r) => {
    locked = r
  })
  let resume!: () => void
  const frozen = frozenReplica.sql.begin(async (tx) => {
    await tx`select seq from audit_heads where tenant_id = ${tenantId} for update`
    locked()
    // Frozen: nothing more is sent on this transaction.
    await new Promise<void>((r) => {
      resume = r
    })
    await tx`select 1`
  })
  // Settled below; until then a rejection must not count as unhandled.
  frozen.catch(() => {})
  await headLocked

  // Another replica appends to the same tenant: it waits for the head's lock.
  const other = postgres(url, { max: 1, onnotice: () => {} })
  t.teardown(() => other.end({ timeout: 1 }))
  const appended = other`update audit_heads set seq = 1 where tenant_id = ${tenantId}`.then(() => 'appended')
  const gaveUp = new Promise((r) => setTimeout(() => r('still waiting after 20 s'), 20_000).unref())
  t.equal(
    await Promise.race([appended, gaveUp]),
    'appended',
    'Postgres ended the idle transaction and freed its lock',
  )

  resume()
  const woke = await frozen.then(
    () => null,
    (err: unknown) => err,
  )
  t.ok(
    isDatabaseUnavailable(woke),
    `the frozen replica learns its transaction was ended when it wakes, as an outage (${(woke as { code?: string })?.code})`,
  )
  const [row] = await frozenReplica.sql<{ one: number }[]>`select 1 as one`
  t.equal(row?.one, 1, 'and its pool goes on')
})
