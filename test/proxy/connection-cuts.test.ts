import { Redis } from 'ioredis'
import postgres from 'postgres'
import t from 'tap'
import { startFleet } from '../helpers/fleet.js'
import { agentRequest, capturingLogger } from '../helpers/proxy.js'
import { PrivateRedis } from '../helpers/redis-server.js'
import { TEST_DATABASE_URL } from '../helpers/servers.js'
import { sleep, waitFor } from '../helpers/wait.js'

/**
 * A database failover or restart, a Redis restart, a load balancer dropping idle connections:
 * every connection writegate holds is cut, again and again, while agents write through the
 * proxies and call the API. No process may crash (tap fails on any unhandled rejection), no
 * answer may be a 500, and once the cuts stop every write the upstream received has its receipt
 * in Postgres, in a chain that verifies.
 */
t.test('connections to Postgres and Redis cut again and again under load', async (t) => {
  const redis = new PrivateRedis()
  await redis.start()
  t.teardown(() => redis.kill())
  const { logger, lines } = capturingLogger()
  const fleet = await startFleet(t, { proxies: 2, redisUrl: redis.url, logger })
  const ports = fleet.proxies.map((p) => p.port)
  const dbName = new URL(fleet.db.url as string).pathname.slice(1)
  const admin = postgres(TEST_DATABASE_URL, { max: 1, onnotice: () => {} })
  const redisAdmin = new Redis(redis.url, { lazyConnect: true, maxRetriesPerRequest: 1 })
  await redisAdmin.connect()
  t.teardown(async () => {
    redisAdmin.disconnect()
    await admin.end({ timeout: 1 })
  })

  const proxyStatuses = new Map<number, number>()
  const apiAnswers = new Map<string, number>()
  const allowed: string[] = []
  let running = true
  const proxyLoad = ports.map(async (port, k) => {
    for (let i = 0; running; i++) {
      const r = await agentRequest(port, {
        method: 'POST',
        path: '/sys_billing/v1/verify',
        body: `{"n":${k}.${i}}`,
      }).catch(() => null)
      if (!r) continue
      proxyStatuses.set(r.status, (proxyStatuses.get(r.status) ?? 0) + 1)
      if (r.status === 200) allowed.push(r.headers['x-writegate-receipt'] as string)
    }
  })
  const apiLoad = (async () => {
    while (running) {
      const r = await fleet.api
        .post('/v1/check', { verb: 'verify', target: 'ch_1' }, { bearer: fleet.tenant.apiKey })
        .catch(() => null)
      if (!r) continue
      const key =
        r.status === 200 ? '200' : `${r.status} ${r.body.code}${r.body.reason ? ` ${r.body.reason}` : ''}`
      apiAnswers.set(key, (apiAnswers.get(key) ?? 0) + 1)
    }
  })()

  await waitFor(() => allowed.length > 10, 20_000, 'writes through before the cuts')
  let pgCut = 0
  let redisCut = 0
  // At least 24 rounds, and on until a cut has met a check's receipt (on a loaded machine the
  // first rounds may all land between checks).
  const metCheck = () => apiAnswers.has('503 unavailable database')
  for (let round = 0; round < 80 && (round < 24 || !metCheck()); round++) {
    await sleep(150)
    if (round % 2 === 0) {
      const killed = await admin`select pg_terminate_backend(pid) from pg_stat_activity
                                 where datname = ${dbName} and pid <> pg_backend_pid()`
      pgCut += killed.length
    } else {
      redisCut += Number(await redisAdmin.call('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes'))
      await redisAdmin.call('CLIENT', 'KILL', 'TYPE', 'pubsub').catch(() => 0)
    }
  }
  const allowedAtEnd = allowed.length
  await waitFor(() => allowed.length > allowedAtEnd + 10, 30_000, 'writes through once the cuts stop')
  running = false
  await Promise.all([...proxyLoad, apiLoad])

  t.ok(pgCut > 0 && redisCut > 0, `connections were cut (Postgres ${pgCut}, Redis ${redisCut})`)
  const only = (m: Map<number, number>, ok: number[]) => [...m.keys()].every((s) => ok.includes(s))
  t.ok(
    only(proxyStatuses, [200, 503]),
    `the proxies answered 200 or 503 (${JSON.stringify([...proxyStatuses])})`,
  )
  const apiOk = ['200', '503 gate_unavailable', '503 unavailable database']
  t.ok(
    [...apiAnswers.keys()].every((a) => apiOk.includes(a)),
    `the API answered 200, or 503 naming the store that failed (${JSON.stringify([...apiAnswers])})`,
  )
  t.ok(
    apiAnswers.has('503 unavailable database'),
    'a check whose receipt met a cut connection got 503 database',
  )

  let missing = allowed
  for (const deadline = Date.now() + 30_000; missing.length > 0 && Date.now() < deadline; ) {
    await fleet.cp.drain?.drainAll().catch(() => {})
    const rows = await fleet.cp.database!.sql<
      { receipt_id: string }[]
    >`select receipt_id from receipts where receipt_id = any(${allowed})`
    const have = new Set(rows.map((r) => r.receipt_id))
    missing = allowed.filter((id) => !have.has(id))
    if (missing.length > 0) await sleep(100)
  }
  t.same(missing, [], `every receipt of an allowed write is in Postgres (${allowed.length})`)
  const verified = await fleet.api.get('/v1/receipts/verify', { bearer: fleet.tenant.apiKey })
  t.equal(verified.status, 200)
  t.equal(verified.body.valid, true, 'the chain verifies')
  t.same(
    lines.filter((l) => l.msg === 'unhandled error'),
    [],
    'nothing was logged as an unhandled error',
  )
})
