import t from 'tap'
import { handlerDeadlineOf, LONGER_DEADLINE_ROUTES } from '../../src/control/http/handler-deadlines.js'
import { openDatabase } from '../../src/store/postgres/connect.js'
import { openTestDatabase } from '../helpers/backends.js'
import { startControlPlane, startWithTenantSystems } from '../helpers/control-plane.js'
import { billingSystems, startRecordingServer } from '../helpers/enrolled-systems.js'
import { startTcpRelay } from '../helpers/tcp-relay.js'
import { sleep } from '../helpers/wait.js'

/**
 * A database that stops answering (a frozen server, a partition that keeps the socket open)
 * held API requests for as long as the client would wait: postgres.js has no per-query timeout.
 * Every route now has a deadline (`server.handlerTimeoutMs`), past which it answers 503.
 */

t.test('a request a stalled database holds is answered 503 at its deadline; the API recovers', async (t) => {
  const real = await openTestDatabase('postgres')
  t.teardown(() => real.close())
  const relay = await startTcpRelay(t, new URL(real.url as string), 5432)
  const db = await openDatabase({ kind: 'postgres', url: relay.url, maxConnections: 4 })
  const { api } = await startControlPlane(t, 'postgres', {
    db: { db, url: relay.url, close: () => db.close() },
    settings: { server: { handlerTimeoutMs: 1000 } },
  })
  const tenant = await api.newTenant()
  t.equal((await api.get('/v1/me', { bearer: tenant.apiKey })).status, 200)

  relay.stall()
  const me = await api.get('/v1/me', { bearer: tenant.apiKey })
  t.equal(me.status, 503)
  t.same(me.body, { error: 'service unavailable', code: 'unavailable', reason: 'deadline' })
  const check = await api.post('/v1/check', { verb: 'verify' }, { bearer: tenant.apiKey })
  t.equal(check.status, 503, 'a check whose receipt cannot be stored is not answered ALLOW')
  t.equal(check.body.code, 'unavailable')

  relay.resume()
  let after = 0
  for (let i = 0; i < 100 && after !== 200; i++) {
    after = (await api.get('/v1/me', { bearer: tenant.apiKey })).status
    if (after !== 200) await sleep(50)
  }
  t.equal(after, 200, 'once the database answers again, so does the API')
})

t.test('a route that calls an upstream may take as long as execute allows', async (t) => {
  const upstream = await startRecordingServer(t)
  const s = await startWithTenantSystems(t, 'fake', (tenantId) => billingSystems(tenantId, upstream.origin), {
    settings: { server: { handlerTimeoutMs: 1000 } },
  })
  const { api, tenant } = s
  const agent = (
    await api.post('/v1/keys', { email: tenant.email, scope: 'agent' }, { bearer: tenant.apiKey })
  ).body.apiKey as string
  upstream.respond(async (_req, res) => {
    await sleep(1500)
    res.writeHead(201, { 'content-type': 'application/json' }).end('{"id":"v_1"}')
  })
  const checked = await api.post(
    '/v1/check',
    { verb: 'verify', request: { systemId: 'sys_billing', method: 'POST', path: '/v1/verify' } },
    { bearer: agent },
  )
  const executed = await api.post(
    '/v1/execute',
    { systemId: 'sys_billing', method: 'POST', path: '/v1/verify', leaseId: checked.body.leaseId },
    { bearer: agent },
  )
  t.equal(executed.status, 200, 'past the default deadline, within execute’s')
  t.equal(executed.headers['x-writegate-upstream-status'], '201')
})

t.test('every route given a longer deadline exists, and gets it', async (t) => {
  const { cp } = await startControlPlane(t, 'fake')
  const d = { defaultMs: 30_000, upstreamCallMs: 120_000 }
  for (const route of LONGER_DEADLINE_ROUTES) {
    const [method, url] = route.split(' ') as [string, string]
    t.ok(cp.app.hasRoute({ method: method as 'GET', url }), `${route} is a route`)
    t.ok(handlerDeadlineOf(method, url, d) > d.defaultMs, `${route} gets longer than the default`)
  }
  t.equal(
    handlerDeadlineOf('POST', '/v1/execute', d),
    135_000,
    'an upstream call: execute’s deadline and 15 s',
  )
  t.equal(handlerDeadlineOf('GET', '/v1/receipts/export', d), 3_600_000, 'the whole log: an hour')
  t.equal(handlerDeadlineOf('GET', '/v1/me', d), 30_000)
})

t.test('a receipt stream is not cut at the deadline: it has answered', async (t) => {
  const { cp, api } = await startControlPlane(t, 'fake', {
    settings: { server: { handlerTimeoutMs: 1000 }, audit: { streamKeepaliveSeconds: 1 } },
  })
  const tenant = await api.newTenant()
  const base = await cp.app.listen({ port: 0, host: '127.0.0.1' })
  const { request } = await import('node:http')
  let text = ''
  let ended = false
  const req = request(new URL('/v1/receipts/stream?since=0', base), {
    headers: { authorization: `Bearer ${tenant.apiKey}` },
  })
  req.on('response', (res) => {
    res.setEncoding('utf8')
    res.on('data', (c: string) => {
      text += c
    })
    res.on('close', () => {
      ended = true
    })
  })
  req.on('error', () => {})
  req.end()
  t.teardown(() => req.destroy())
  await sleep(2500)
  t.notOk(ended, 'still open 2.5 s in, past the 1 s deadline')
  t.match(text, /: keepalive/, 'and keeping alive')
})
