import t from 'tap'
import { startFleet } from '../helpers/fleet.js'
import { agentRequest } from '../helpers/proxy.js'
import { PrivateRedis } from '../helpers/redis-server.js'

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

  await new Promise((r) => setTimeout(r, 700))
  phase = 'down'
  const upstreamAtKill = fleet.upstream.received.length
  await redis.kill()
  await new Promise((r) => setTimeout(r, 300))
  const upstreamWhileDown = fleet.upstream.received.length
  phase = 'down-settled'
  await new Promise((r) => setTimeout(r, 1200))
  t.equal(
    fleet.upstream.received.length,
    upstreamWhileDown,
    'while Redis is down, the upstream receives nothing',
  )
  const downSettled = seen.filter((s) => s.phase === 'down-settled')
  t.ok(downSettled.length > 5, `load kept going while Redis was down (${downSettled.length} writes)`)
  t.ok(
    downSettled.every((s) => s.status === 503),
    `every write during the outage got 503 (${[...new Set(downSettled.map((s) => s.status))]})`,
  )

  await redis.start()
  phase = 'back'
  await new Promise((r) => setTimeout(r, 1500))
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
  for (let i = 0; i < 100 && missing.length > 0; i++) {
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
  for (let i = 0; i < 100 && present.size < new Set(upstreamReceipts).size; i++) {
    await new Promise((r) => setTimeout(r, 100))
    present = await inPostgres()
  }
  t.same(
    upstreamReceipts.filter((id) => !present.has(id)),
    [],
    'no upstream write lacks its receipt in Postgres',
  )
})
