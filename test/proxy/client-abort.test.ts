import { randomBytes } from 'node:crypto'
import { request } from 'node:http'
import t from 'tap'
import { startBillingProxy } from '../helpers/billing-proxy.js'
import { agentRequest, capturingLogger, LOG_LEVEL } from '../helpers/proxy.js'

/**
 * Sends 1,000 bytes of a longer body, then hangs up `afterMs` later. Resolves once the socket
 * is gone, with whether the proxy answered first.
 */
function abortMidBody(
  port: number,
  method: string,
  path: string,
  headers: Record<string, string>,
  afterMs: number,
): Promise<{ answered: boolean }> {
  return new Promise((resolve) => {
    let answered = false
    const req = request({ host: '127.0.0.1', port, method, path, headers })
    req.on('response', () => {
      answered = true
    })
    req.on('error', () => resolve({ answered }))
    req.on('close', () => resolve({ answered }))
    req.write(randomBytes(1000), () => setTimeout(() => req.destroy(), afterMs))
  })
}

/**
 * A STEP_UP write is staged with its body, so the proxy reads the body before deciding. A
 * client that goes away mid-body is the client's doing, not a proxy failure: nothing is decided
 * or staged, nothing is logged as an error, and nothing is written to the dead socket.
 */
t.test('a client that aborts mid-body on a STEP_UP route', async (t) => {
  const { logger, lines } = capturingLogger()
  const { upstream, cp, tenant: o, proxy } = await startBillingProxy(t, { logger })

  const { answered } = await abortMidBody(
    proxy.port,
    'POST',
    '/sys_billing/v1/refunds',
    { 'content-type': 'application/json', 'content-length': '100000' },
    50,
  )
  t.notOk(answered, 'no answer was expected')
  const aborted = () => lines.find((l) => /client went away/.test(l.msg))
  const failed = () => lines.find((l) => l.level >= LOG_LEVEL.error)
  for (let i = 0; i < 200 && !aborted() && !failed(); i++) await new Promise((r) => setTimeout(r, 10))

  t.equal(failed(), undefined, 'nothing is logged as an error')
  t.ok(aborted(), 'the abort is logged')
  t.ok((aborted()?.level ?? 0) <= LOG_LEVEL.info, 'at info or below')
  t.match(aborted(), { cause: String }, 'with its cause')
  t.notOk(JSON.stringify(aborted()).includes('"stack"'), 'and no stack trace: it is no fault of the proxy')
  const staged = await cp.database!.sql<{ n: number }[]>`
    select count(*)::int as n from pending_actions where tenant_id = ${o.tenantId}`
  t.equal(staged[0]?.n, 0, 'nothing was staged')
  t.equal(upstream.received.length, 0)
  const next = await agentRequest(proxy.port, {
    method: 'POST',
    path: '/sys_billing/v1/refunds',
    body: '{"charge":"ch_1"}',
  })
  t.equal(next.status, 428, 'the next request is served')
})

/**
 * An ALLOWed write is decided on its headers and its body streamed upstream. A client that
 * hangs up halfway is on record (the decision stands) but is no upstream failure.
 */
t.test('a client that aborts mid-body while an ALLOWed write is forwarded', async (t) => {
  const { logger, lines } = capturingLogger()
  const { api, tenant: o, proxy } = await startBillingProxy(t, { logger })
  t.equal((await api.put('/v1/policy', { verify: 'allow' }, { bearer: o.apiKey })).status, 200)

  await abortMidBody(
    proxy.port,
    'PUT',
    '/sys_billing/v1/upload/big',
    { 'content-type': 'application/octet-stream', 'content-length': '1000000' },
    100,
  )
  const cuts = () => lines.filter((l) => /client request cut short while forwarding/.test(l.msg))
  const gone = () => cuts()[0]
  for (let i = 0; i < 200 && !gone(); i++) await new Promise((r) => setTimeout(r, 10))
  await new Promise((r) => setTimeout(r, 100))
  t.equal(cuts().length, 1, 'once (http-proxy reports it twice)')

  t.ok(gone(), 'the abort is logged')
  t.ok((gone()?.level ?? 0) <= LOG_LEVEL.info, 'at info or below')
  t.equal(
    lines.find((l) => l.level >= LOG_LEVEL.warn),
    undefined,
    'nothing is logged as a warning or an error',
  )
  const next = await agentRequest(proxy.port, { method: 'POST', path: '/sys_billing/v1/verify', body: '{}' })
  t.equal(next.status, 200, 'the next request is served')
})
