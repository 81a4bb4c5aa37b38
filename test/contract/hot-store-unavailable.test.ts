import { createServer, type Socket } from 'node:net'
import t from 'tap'
import { connectRedis } from '../../src/store/redis/connect.js'
import { isHotStoreUnavailable } from '../../src/store/redis/hot-store-unavailable.js'
import { startFleet } from '../helpers/fleet.js'
import { PrivateRedis } from '../helpers/redis-server.js'
import { TEST_REDIS_URL } from '../helpers/servers.js'

/** The error a promise rejects with (or a note that it did not). */
const failureOf = (p: Promise<unknown>) =>
  p.then(
    () => new Error('it did not fail'),
    (err: unknown) => err,
  )

t.test("a real ioredis's errors for a Redis away or unable are each recognised", async (t) => {
  const closed = connectRedis({ url: TEST_REDIS_URL, keyPrefix: 'wgt:unavail:' })
  await closed.connect()
  closed.disconnect()
  const afterClose = await failureOf(closed.get('k'))
  t.ok(isHotStoreUnavailable(afterClose), `a closed connection: ${(afterClose as Error).message}`)

  // A server that accepts and never answers: the client never becomes ready.
  const sockets = new Set<Socket>()
  const silent = createServer((s) => {
    sockets.add(s)
    s.on('error', () => {})
  })
  await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r))
  t.teardown(() => {
    for (const s of sockets) s.destroy()
    silent.close()
  })
  const stuck = connectRedis({
    url: `redis://127.0.0.1:${(silent.address() as { port: number }).port}`,
    keyPrefix: 'wgt:unavail:',
  })
  stuck.on('error', () => {})
  stuck.connect().catch(() => {})
  const notReady = await failureOf(stuck.get('k'))
  t.ok(isHotStoreUnavailable(notReady), `not connected yet: ${(notReady as Error).message}`)
  stuck.disconnect()

  // A replica (after a failover, the old primary): writes are refused.
  const replica = new PrivateRedis()
  await replica.start()
  t.teardown(() => replica.kill())
  const r = connectRedis({ url: replica.url, keyPrefix: 'wgt:unavail:' })
  await r.connect()
  t.teardown(() => r.disconnect())
  await r.call('REPLICAOF', '127.0.0.1', '1')
  let reconnected = false
  r.once('reconnecting', () => {
    reconnected = true
  })
  const readOnly = await failureOf(r.set('k', 'v'))
  t.ok(isHotStoreUnavailable(readOnly), `a replica: ${(readOnly as Error).message}`)
  // Once the failover points the URL elsewhere, a new connection reaches the new primary.
  for (let i = 0; i < 50 && !reconnected; i++) await new Promise((res) => setTimeout(res, 20))
  t.ok(reconnected, 'READONLY makes the client connect again, not stay on a demoted server')
  await new Promise<void>((res) => (r.status === 'ready' ? res() : r.once('ready', () => res())))
  await r.call('REPLICAOF', 'NO', 'ONE')

  // Not every Redis error is an outage: a command against the wrong type is a bug.
  await r.set('s', 'v')
  const wrongType = await failureOf(r.lpush('s', 'x'))
  t.match((wrongType as Error).message, /^WRONGTYPE/)
  t.notOk(isHotStoreUnavailable(wrongType), 'WRONGTYPE is not an outage')
  t.notOk(isHotStoreUnavailable(new Error('boom')))
  t.notOk(isHotStoreUnavailable('Connection is closed.'))
})

t.test('with Redis away, the API and the portal answer 503, not 500', async (t) => {
  const redis = new PrivateRedis()
  await redis.start()
  t.teardown(() => redis.kill())
  const fleet = await startFleet(t, { proxies: 0, redisUrl: redis.url })
  await redis.kill()
  const me = await fleet.api.get('/v1/me', { bearer: fleet.tenant.apiKey })
  t.same([me.status, me.body.code, me.body.reason], [503, 'unavailable', 'hot_store'], 'GET /v1/me')
  const receipts = await fleet.api.get('/v1/receipts', { bearer: fleet.tenant.apiKey })
  t.equal(receipts.status, 200, 'an admin read that needs only Postgres still works')
  const key = await fleet.api.post('/v1/keys', { email: 'new-person@example.com' })
  t.same([key.status, key.body.code], [503, 'unavailable'], 'POST /v1/keys (its issuance limit is in Redis)')
  // The portal's sign-in counts attempts in Redis too.
  const page = await fleet.cp.app.inject({ method: 'GET', url: '/portal/sign-in' })
  const pre = /wg_portal_pre=([^;]+)/.exec(String(page.headers['set-cookie']))?.[1] as string
  const signIn = await fleet.cp.app.inject({
    method: 'POST',
    url: '/portal/sign-in',
    headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: `wg_portal_pre=${pre}` },
    payload: new URLSearchParams({ _csrf: pre, apiKey: fleet.tenant.apiKey, code: '123456' }).toString(),
  })
  t.equal(signIn.statusCode, 503, 'the portal: a page saying the service is unavailable')
  t.match(signIn.body, /unavailable/)
  // Back, so the fleet closes cleanly.
  await redis.start()
})
