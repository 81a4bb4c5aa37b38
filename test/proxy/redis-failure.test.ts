import t from 'tap'
import { startFleet } from '../helpers/fleet.js'
import { agentRequest } from '../helpers/proxy.js'
import { PrivateRedis } from '../helpers/redis-server.js'
import { sleep, waitFor } from '../helpers/wait.js'

/**
 * Guarantee 4 (contract §1.1): Redis stopped under load → every write gets 503 and the
 * upstream sees none; after Redis returns, every write the upstream received has its
 * receipt in Postgres. Redis runs with AOF (appendfsync always), as the chart documents.
 */
t.test('Redis failure under load: fail closed, and no write without its receipt', async (t) => {
  const redis = new PrivateRedis()
  await redis.start()
  t.teardown(() => redis.kill())
  const fleet = await startFleet(t, { proxies: 2, redisUrl: redis.url })
  const ports = fleet.proxies.map((p) => p.port)
  const seen: { status: number; receiptId?: string; phase: string }[] = []
  let phase = 'up'
  let running = true
  const load = (async () => {
    let i = 0
    while (running) {
      const port = ports[i++ % ports.length] as number
      const p = phase
      const r = await agentRequest(port, {
        method: 'POST',
        path: '/sys_billing/v1/verify',
        body: `{"n":${i}}`,
      }).catch(() => null)
      if (r)
        seen.push({
          status: r.status,
          phase: p,
          ...(r.status === 200 ? { receiptId: r.headers['x-writegate-receipt'] as string } : {}),
        })
    }
  })()

  const count = (phase: string, status?: number) =>
    seen.filter((s) => s.phase === phase && (status === undefined || s.status === status)).length
  const statuses = (phase: string) =>
    `${[...new Set(seen.filter((s) => s.phase === phase).map((s) => s.status))]}`
  // Every phase ends on what the load has seen, not after a fixed delay: on a loaded machine a
  // timetable skews. The deadlines only bound a hang.
  await waitFor(
    () => count('up', 200) > 5,
    20_000,
    () => `writes through before the outage (${statuses('up')})`,
  )
  phase = 'down'
  const upstreamAtKill = fleet.upstream.received.length
  await redis.kill()
  // The load sends one write at a time: once one sent after the kill is answered, the one in
  // flight at the kill is done. Then once one sent after that is answered, so is every 'down' one.
  await waitFor(() => count('down') > 0, 20_000, 'an answer to a write sent after the kill')
  phase = 'down-settled'
  await waitFor(() => count('down-settled') > 0, 20_000, 'an answer to a write sent once the outage settled')
  const upstreamWhileDown = fleet.upstream.received.length
  const settledAt = Date.now()
  await waitFor(() => count('down-settled') > 5, 20_000, 'more writes during the outage')
  // And an outage of 1.2 s at least (a lower bound): writes meet ioredis while it reconnects too.
  await sleep(settledAt + 1200 - Date.now())
  t.equal(
    fleet.upstream.received.length,
    upstreamWhileDown,
    'while Redis is down, the upstream receives nothing',
  )
  const downSettled = seen.filter((s) => s.phase === 'down-settled')
  t.ok(downSettled.length > 5, `load kept going while Redis was down (${downSettled.length} writes)`)
  t.ok(
    downSettled.every((s) => s.status === 503),
    `every write during the outage got 503 (${statuses('down-settled')})`,
  )

  await redis.start()
  phase = 'back'
  // ioredis reconnects with a backoff of up to 1 s: wait for a write through, however long it takes.
  await waitFor(
    () => count('back', 200) > 0,
    20_000,
    () => `a write through once Redis is back (${statuses('back')})`,
  )
  running = false
  await load

  t.ok(
    seen.filter((s) => s.phase === 'up' && s.status === 200).length > 5,
    'writes went through before the outage',
  )
  t.ok(seen.filter((s) => s.phase === 'back' && s.status === 200).length > 0, 'and again once Redis was back')
  t.ok(
    upstreamWhileDown - upstreamAtKill <= ports.length,
    'at most the requests already committed when Redis died were forwarded',
  )

  // Every write the upstream received has its receipt in Postgres, once drained.
  const allowed = seen.filter((s) => s.status === 200).map((s) => s.receiptId as string)
  let missing: string[] = allowed
  for (const deadline = Date.now() + 30_000; missing.length > 0 && Date.now() < deadline; ) {
    await fleet.cp.drain?.drainAll().catch(() => {})
    const rows = await fleet.cp.database!.sql<
      { receipt_id: string }[]
    >`select receipt_id from receipts where receipt_id = any(${allowed})`
    const have = new Set(rows.map((r) => r.receipt_id))
    missing = allowed.filter((id) => !have.has(id))
    if (missing.length > 0) await new Promise((r) => setTimeout(r, 100))
  }
  t.same(missing, [], 'every receipt a client saw is in Postgres')
  // And the converse, exactly: every write the upstream received names its receipt, which is in Postgres.
  const upstreamReceipts = fleet.upstream.received.map((r) => r.headers['x-writegate-receipt'] as string)
  t.ok(
    upstreamReceipts.every((id) => /^rcp_/.test(id)),
    'every upstream write carries the receipt that authorised it',
  )
  const inPostgres = async () =>
    new Set(
      (
        await fleet.cp.database!.sql<
          { receipt_id: string }[]
        >`select receipt_id from receipts where receipt_id = any(${upstreamReceipts})`
      ).map((r) => r.receipt_id),
    )
  let present = await inPostgres()
  for (
    const deadline = Date.now() + 30_000;
    present.size < new Set(upstreamReceipts).size && Date.now() < deadline;
  ) {
    await new Promise((r) => setTimeout(r, 100))
    present = await inPostgres()
  }
  t.same(
    upstreamReceipts.filter((id) => !present.has(id)),
    [],
    'no upstream write lacks its receipt in Postgres',
  )
})
