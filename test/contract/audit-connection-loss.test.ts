import postgres from 'postgres'
import t from 'tap'
import { createGroupCommitAuditLog } from '../../src/audit/group-commit.js'
import { newId } from '../../src/core/ids.js'
import { draft } from '../../src/core/receipt.js'
import { createSystemOfRecord } from '../../src/store/postgres/system-of-record.js'
import { openTestDatabase } from '../helpers/backends.js'
import { TEST_DATABASE_URL } from '../helpers/servers.js'
import { sleep } from '../helpers/wait.js'

/**
 * Group-committed appends run as one statement or, when that fails, in a transaction on a
 * connection reserved from the pool. Postgres cutting those connections mid-append must not
 * lose an acknowledged receipt, leave a connection stuck, or break the chain.
 */
t.test('appends whose connections are cut: each settles, the pool recovers, the chain holds', async (t) => {
  const tdb = await openTestDatabase('postgres')
  const admin = postgres(TEST_DATABASE_URL, { max: 1, onnotice: () => {} })
  t.teardown(async () => {
    await admin.end({ timeout: 1 })
    await tdb.close()
  })
  const dbName = new URL(tdb.url as string).pathname.slice(1)
  const sor = createSystemOfRecord(tdb.db)
  // Counts the one-statement appends the cuts broke (the group commit retries those in a transaction).
  let statementsCut = 0
  const appendChained = sor.stores.receipts.appendChained
  sor.stores.receipts.appendChained = (batches) =>
    appendChained(batches).catch((err: unknown) => {
      statementsCut += 1
      throw err
    })
  const log = createGroupCommitAuditLog({ sor })
  const tenantId = newId('tenant')
  const d = () =>
    draft({ receiptId: newId('receipt'), tenantId, kind: 'CHECK', decision: 'ALLOW', createdAt: 1 })

  const acknowledged: string[] = []
  let failed = 0
  let stop = false
  const appenders = Array.from({ length: 16 }, async () => {
    while (!stop) {
      try {
        const [r] = await log.append([d()])
        acknowledged.push(r?.receiptId as string)
      } catch {
        failed += 1
        await sleep(5)
      }
    }
  })
  let cut = 0
  // At least four rounds, and on until a cut has hit an append in flight and others went
  // through: on a loaded machine four may all land between appends.
  const hit = () => cut > 0 && statementsCut + failed > 0 && acknowledged.length > 0
  for (let i = 0; i < 40 && (i < 4 || !hit()); i++) {
    await sleep(250)
    const killed = await admin`select pg_terminate_backend(pid) from pg_stat_activity
                               where datname = ${dbName} and pid <> pg_backend_pid()`
    cut += killed.length
  }
  await sleep(250)
  stop = true
  await Promise.all(appenders)
  t.ok(cut > 0, `connections were cut (${cut})`)
  t.ok(
    statementsCut + failed > 0,
    `the cuts hit appends in flight (${statementsCut} statements cut and retried, ${failed} appends failed)`,
  )
  t.ok(acknowledged.length > 0, `others went through (${acknowledged.length})`)

  // The pool recovers: more appends than it has connections all succeed.
  const after = await Promise.all(Array.from({ length: 24 }, () => log.append([d()])))
  t.equal(after.flat().length, 24, 'appends succeed once Postgres is back')

  const stored = await sor.stores.receipts.list(tenantId, 0, 1_000_000)
  const ids = new Set(stored.map((r) => r.receiptId))
  t.same(
    acknowledged.filter((id) => !ids.has(id)),
    [],
    'every acknowledged receipt is in the log',
  )
  t.same(
    stored.map((r) => r.seq),
    stored.map((_, i) => i + 1),
    'seq gap-free',
  )
  t.ok(
    stored.every((r, i) => i === 0 || r.prevHash === stored[i - 1]?.hash),
    'each prevHash is the previous hash',
  )
  const [open] = await admin<{ n: number }[]>`select count(*)::int as n from pg_stat_activity
                                              where datname = ${dbName} and state like 'idle in transaction%'`
  t.equal(open?.n, 0, 'no connection is left inside a transaction')
})
