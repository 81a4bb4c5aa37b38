import { generate } from 'otplib'
import t from 'tap'
import type { ManualClock } from '../../src/core/clock.js'
import { startWithTenantSystems, storedReceipts } from '../helpers/control-plane.js'
import { billingSystems, startRecordingServer } from '../helpers/enrolled-systems.js'

/**
 * An upstream that answered a write with a status below 500 did the write, even if its body
 * then outgrew `execute.maxResponseBytes` (or stalled). Reported as "may or may not have
 * happened", the action went back to pending, and approving it again wrote twice.
 */
t.test('a write answered 201 with an oversized body is done, not pending again', async (t) => {
  const upstream = await startRecordingServer(t)
  const s = await startWithTenantSystems(t, 'fake', (tenantId) => billingSystems(tenantId, upstream.origin), {
    settings: { execute: { maxResponseBytes: 2048 } },
  })
  const { api, tenant } = s
  const clock = s.clock as ManualClock
  const admin = tenant.apiKey
  const agent = (await api.post('/v1/keys', { email: tenant.email, scope: 'agent' }, { bearer: admin })).body
    .apiKey as string
  const staged = await api.post(
    '/v1/check',
    {
      verb: 'refund',
      target: 'ch_1',
      tool: { name: 'issue_refund', params: { charge: 'ch_1', amount: 500 } },
    },
    { bearer: agent },
  )
  const actionId = staged.body.actionId as string
  t.ok(actionId, 'staged for approval')
  upstream.respond((_req, res) => {
    res
      .writeHead(201, { 'content-type': 'application/json' })
      .end(JSON.stringify({ id: 're_1', pad: 'x'.repeat(4096) }))
  })
  const code = generate({ secret: tenant.totp.secret, epoch: Math.floor(clock.nowMs() / 1000) })
  const approved = await api.post(
    `/v1/agent/actions/${actionId}/approve`,
    { totpCode: await code },
    { bearer: admin },
  )
  t.equal(approved.status, 200)
  t.match(approved.body, {
    type: 'executed',
    result: { ok: true, status: 201, upstreamCalled: true, responseIncomplete: 'response_too_large' },
  })
  const pending = (await api.get('/v1/agent/actions', { bearer: admin })).body.actions as {
    actionId: string
  }[]
  t.notOk(
    pending.some((a) => a.actionId === actionId),
    'not pending again: it cannot be approved into a second write',
  )
  t.equal(upstream.requests.length, 1, 'one write upstream')
  const outcomes = (await storedReceipts(s.cp, tenant.tenantId)).filter(
    (r) => r.kind === 'EXECUTE' && r.detail.phase === 'completed',
  )
  t.match(
    outcomes.map((r) => r.detail),
    [{ outcome: 'response', status: 201, responseIncomplete: 'response_too_large' }],
    'its outcome receipt says it was answered, and why no body is on record',
  )

  // The same through /v1/execute: the upstream's status, no body, and why.
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
  t.equal(executed.status, 200)
  t.equal(executed.headers['x-writegate-upstream-status'], '201')
  t.equal(executed.headers['x-writegate-upstream-incomplete'], 'response_too_large')
})

/**
 * Each timeout bounds one wait; an upstream that trickles its answer (a byte well inside
 * `execute.bodyTimeoutMs`, for ever) would hold the call, its pool connection and the agent
 * open without end. `execute.deadlineMs` bounds the whole call.
 */
t.test('an upstream that trickles its answer for ever is cut at the deadline', async (t) => {
  const upstream = await startRecordingServer(t)
  const s = await startWithTenantSystems(t, 'fake', (tenantId) => billingSystems(tenantId, upstream.origin), {
    settings: { execute: { deadlineMs: 1000, bodyTimeoutMs: 30000, headersTimeoutMs: 30000 } },
  })
  const { api, tenant } = s
  const agent = (
    await api.post('/v1/keys', { email: tenant.email, scope: 'agent' }, { bearer: tenant.apiKey })
  ).body.apiKey as string
  const trickles = new Set<NodeJS.Timeout>()
  t.teardown(() => {
    for (const timer of trickles) clearInterval(timer)
  })
  const execute = async () => {
    const checked = await api.post(
      '/v1/check',
      { verb: 'verify', request: { systemId: 'sys_billing', method: 'POST', path: '/v1/verify' } },
      { bearer: agent },
    )
    return api.post(
      '/v1/execute',
      { systemId: 'sys_billing', method: 'POST', path: '/v1/verify', leaseId: checked.body.leaseId },
      { bearer: agent },
    )
  }

  // A status, then a byte every 100 ms.
  upstream.respond((_req, res) => {
    res.writeHead(201, { 'content-type': 'text/plain' })
    const timer = setInterval(() => res.write('.'), 100)
    trickles.add(timer)
    res.on('close', () => clearInterval(timer))
  })
  const answered = await execute()
  t.equal(answered.status, 200, 'answered below 500: the write is done')
  t.equal(answered.headers['x-writegate-upstream-status'], '201')
  t.equal(answered.headers['x-writegate-upstream-incomplete'], 'deadline_exceeded')

  // No status at all, well inside the headers timeout.
  upstream.respond(() => new Promise<void>(() => {}))
  const silent = await execute()
  t.equal(silent.status, 502)
  t.match(silent.body, {
    code: 'upstream_error',
    failure: 'deadline_exceeded',
    timeout: true,
    upstreamCalled: true,
  })
  const outcomes = (await storedReceipts(s.cp, tenant.tenantId)).filter(
    (r) => r.kind === 'EXECUTE' && r.detail.phase === 'completed',
  )
  t.match(
    outcomes.map((r) => r.detail),
    [
      { outcome: 'response', status: 201, responseIncomplete: 'deadline_exceeded' },
      { outcome: 'upstream_error', failure: 'deadline_exceeded', timeout: true },
    ],
  )
})
