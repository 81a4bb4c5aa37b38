import { randomBytes } from 'node:crypto'
import { request } from 'node:http'
import t from 'tap'
import { startBillingProxy } from '../helpers/billing-proxy.js'
import { agentRequest, capturingLogger, LOG_LEVEL } from '../helpers/proxy.js'
import { sleep, waitFor } from '../helpers/wait.js'

/**
 * Sends 1,000 bytes of a longer body, then hangs up once `hangUp` resolves. Resolves once the
 * socket is gone, with whether the proxy answered first.
 */
function abortMidBody(
  port: number,
  method: string,
  path: string,
  headers: Record<string, string>,
  hangUp: () => Promise<unknown>,
): Promise<{ answered: boolean }> {
  return new Promise((resolve) => {
    let answered = false
    const req = request({ host: '127.0.0.1', port, method, path, headers })
    req.on('response', () => {
      answered = true
    })
    req.on('error', () => resolve({ answered }))
    req.on('close', () => resolve({ answered }))
    req.write(randomBytes(1000), () => void hangUp().then(() => req.destroy()))
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
    // Either way the body is cut short: before the proxy reads it, or while it does.
    () => sleep(50),
  )
  t.notOk(answered, 'no answer was expected')
  const aborted = () => lines.find((l) => /client went away before its request body was read/.test(l.msg))
  const failed = () => lines.find((l) => l.level >= LOG_LEVEL.error)
  await waitFor(() => aborted() || failed(), 15_000, 'the abort, or an error, in the log')

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
  const { api, upstream, tenant: o, proxy } = await startBillingProxy(t, { logger })
  t.equal((await api.put('/v1/policy', { verify: 'allow' }, { bearer: o.apiKey })).status, 200)

  // Hung up once the upstream has the write's headers: forwarding is under way, whatever the
  // machine's load (a fixed delay could fire before the decision was made).
  await abortMidBody(
    proxy.port,
    'PUT',
    '/sys_billing/v1/upload/big',
    { 'content-type': 'application/octet-stream', 'content-length': '1000000' },
    () => waitFor(() => upstream.arrivals > 0, 15_000, 'the write at the upstream'),
  )
  t.equal(upstream.arrivals, 1, 'the write was being forwarded when the client hung up')
  const cuts = () => lines.filter((l) => /client request cut short while forwarding/.test(l.msg))
  await waitFor(() => cuts().length > 0, 15_000, 'the cut in the log')
  await sleep(100) // room for a second report, which must not come (a lower bound, not a wait)
  t.equal(cuts().length, 1, 'once (http-proxy reports it twice)')

  t.ok((cuts()[0]?.level ?? 0) <= LOG_LEVEL.info, 'at info or below')
  t.equal(
    lines.find((l) => l.level >= LOG_LEVEL.warn),
    undefined,
    'nothing is logged as a warning or an error',
  )
  const next = await agentRequest(proxy.port, { method: 'POST', path: '/sys_billing/v1/verify', body: '{}' })
  t.equal(next.status, 200, 'the next request is served')
})

/**
 * A client can go away while its write is being decided. The ALLOW and its receipt stand, but
 * nothing may be sent upstream for a socket no one holds, and the receipt that authorised
 * nothing is on record for whoever reconciles it.
 */
t.test('a client that goes away while its ALLOWed write is decided', async (t) => {
  const { logger, lines } = capturingLogger()
  let decided!: () => void
  const decision = new Promise<void>((r) => {
    decided = r
  })
  let release!: () => void
  const held = new Promise<void>((r) => {
    release = r
  })
  const {
    api,
    upstream,
    tenant: o,
    proxy,
  } = await startBillingProxy(t, {
    logger,
    // The real step decides and commits its receipt; its answer is held until the client is gone.
    writes: (real) => ({
      predict: (w) => real.predict(w),
      async run(w, p) {
        const answer = await real.run(w, p)
        decided()
        await held
        return answer
      },
    }),
  })
  t.equal((await api.put('/v1/policy', { verify: 'allow' }, { bearer: o.apiKey })).status, 200)

  const { answered } = await abortMidBody(
    proxy.port,
    'PUT',
    '/sys_billing/v1/upload/big',
    { 'content-type': 'application/octet-stream', 'content-length': '1000000' },
    // Bounded: were the write ever predicted STEP_UP, the proxy would wait for its body instead.
    () =>
      Promise.race([
        decision,
        new Promise((_, reject) =>
          setTimeout(() => reject(new Error('the write was never decided')), 15_000).unref(),
        ),
      ]),
  )
  t.notOk(answered)
  const server = proxy.proxy.server
  const open = () => new Promise<number>((r) => server.getConnections((_e, n) => r(n)))
  await waitFor(async () => (await open()) === 0, 15_000, 'the proxy to see the client go')
  t.equal(await open(), 0, 'the proxy saw the client go')
  release()

  const gone = () => lines.find((l) => /client went away before its write was forwarded/.test(l.msg))
  await waitFor(gone, 15_000, 'the line in the log')
  t.ok(gone(), 'it is logged')
  t.match(
    gone(),
    { level: LOG_LEVEL.info, system: 'sys_billing', receiptId: /^rcp_/ },
    'at info, with its receipt',
  )
  t.equal(
    lines.find((l) => l.level >= LOG_LEVEL.warn),
    undefined,
    'nothing is logged as a warning or an error',
  )
  // The line is logged where forwarding stops, so nothing can follow it; the pause only gives a
  // write that got out anyway the time to show.
  await sleep(100)
  t.equal(upstream.arrivals, 0, 'nothing was sent upstream')
})
