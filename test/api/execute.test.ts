import type { AddressInfo } from 'node:net'
import { createServer as createNetServer } from 'node:net'
import t, { type Test } from 'tap'
import type { ManualClock } from '../../src/core/clock.js'
import { canonicalJson } from '../../src/core/jcs.js'
import { requestBinding } from '../../src/core/lease-binding.js'
import { sha256Hex } from '../../src/core/secret-hash.js'
import { API_BACKENDS } from '../helpers/backends.js'
import {
  type StartOptions,
  startWithTenantSystems,
  storedReceipts,
  type TestStorageKind,
} from '../helpers/control-plane.js'
import {
  billingSystems,
  CREDENTIAL_SECRET,
  type RecordingServer,
  startRecordingServer,
} from '../helpers/enrolled-systems.js'

const REFUND = { charge: 'ch_1', amount: 500 }

async function setup(t: Test, kind: TestStorageKind = 'fake', opts: StartOptions = {}) {
  const upstream = await startRecordingServer(t)
  const other = await startRecordingServer(t)
  const started = await startWithTenantSystems(
    t,
    kind,
    (tenantId) => billingSystems(tenantId, upstream.origin, other.origin),
    opts,
  )
  const { api, cp, tenant } = started
  const key = tenant.apiKey
  /** An ALLOW check bound to a request: its leaseId and token. */
  const lease = async (request: Record<string, unknown>, bearer = key) => {
    const r = await api.post('/v1/check', { verb: 'verify', target: 'ch_1', request }, { bearer })
    if (!r.body.leaseId) throw new Error(`no lease: ${JSON.stringify(r.body)}`)
    return r.body as { leaseId: string; token: string; receiptId: string }
  }
  const execute = (body: Record<string, unknown>, bearer = key, headers?: Record<string, string>) =>
    api.post('/v1/execute', body, { bearer, ...(headers ? { headers } : {}) })
  const executeReceipts = async () =>
    (await storedReceipts(cp, tenant.tenantId)).filter((r) => r.kind === 'EXECUTE')
  return { ...started, upstream, other, key, lease, execute, executeReceipts }
}

const refundRequest = { systemId: 'sys_billing', method: 'POST', path: '/v1/refunds', body: REFUND }

t.test('a leased execute reaches the enrolled upstream, with the injected credential', async (t) => {
  const s = await setup(t)
  const l = await s.lease(refundRequest)
  let durableBeforeCall: unknown[] = []
  s.upstream.onRequest(async () => {
    // What is on record at the moment the upstream sees the request.
    durableBeforeCall = await s.executeReceipts()
  })
  const answer = '{ "id": "re_9",  "status": "pending" }'
  s.upstream.respond((_req, res) => {
    res.writeHead(201, { 'content-type': 'application/vnd.billing+json; charset=utf-8' })
    res.end(answer)
  })
  // Raw inject: the body must be compared as bytes, not as parsed JSON.
  const r = await s.cp.app.inject({
    method: 'POST',
    url: '/v1/execute',
    headers: {
      authorization: `Bearer ${s.key}`,
      'content-type': 'application/json',
      'x-forwarded-host': 'evil.example',
      'x-custom': 'from-agent',
      cookie: 'a=b',
    },
    payload: JSON.stringify({ ...refundRequest, leaseId: l.leaseId, idempotencyKey: 'idem-42' }),
  })
  t.equal(r.statusCode, 200)
  t.equal(r.body, answer, 'the upstream body, verbatim')
  t.equal(r.headers['content-type'], 'application/vnd.billing+json; charset=utf-8')
  t.equal(r.headers['x-writegate-upstream-status'], '201')
  t.match(r.headers['x-writegate-receipt'], /^rcp_/)

  t.equal(s.upstream.requests.length, 1)
  const seen = s.upstream.requests[0]!
  t.equal(seen.method, 'POST')
  t.equal(seen.url, '/v1/refunds')
  t.equal(seen.body, canonicalJson(REFUND), 'the bound JCS bytes')
  t.equal(
    seen.headers.authorization,
    `Bearer ${CREDENTIAL_SECRET}`,
    'the injected credential, not the API key',
  )
  t.equal(seen.headers['idempotency-key'], 'idem-42')
  t.equal(seen.headers['x-writegate-receipt'], r.headers['x-writegate-receipt'], 'the authorising receipt')
  t.equal(seen.headers['content-type'], 'application/json')
  t.equal(seen.headers.host, new URL(s.upstream.origin).host)
  for (const h of ['x-forwarded-host', 'x-custom', 'cookie'])
    t.notOk(seen.headers[h], `${h} from the caller is not forwarded`)

  t.equal(durableBeforeCall.length, 1, 'the authorising receipt was durable before the call')
  t.match(durableBeforeCall[0], { decision: 'ALLOW', detail: { phase: 'authorized' } })
  const receipts = await s.executeReceipts()
  t.equal(receipts.length, 2)
  t.match(receipts[0], {
    receiptId: r.headers['x-writegate-receipt'],
    kind: 'EXECUTE',
    decision: 'ALLOW',
    verb: 'verify',
    // Its route reads no target off the write: the agent's `target` is not taken for it.
    target: null,
    keyId: s.tenant.keyId,
    detail: {
      phase: 'authorized',
      via: 'lease',
      leaseId: l.leaseId,
      systemId: 'sys_billing',
      method: 'POST',
      path: '/v1/refunds',
      idempotencyKey: 'idem-42',
    },
  })
  t.match(receipts[1], {
    kind: 'EXECUTE',
    decision: 'ALLOW',
    detail: {
      phase: 'completed',
      authorizedReceiptId: receipts[0].receiptId,
      outcome: 'response',
      status: 201,
      upstreamCalled: true,
      responseBytes: Buffer.byteLength(answer),
      responseSha256: sha256Hex(answer),
    },
  })
  t.notOk(JSON.stringify(receipts).includes(CREDENTIAL_SECRET), 'the credential is in no receipt')

  const again = await s.execute({ ...refundRequest, leaseId: l.leaseId })
  t.match(again.body, { ok: false, reason: 'lease_used', upstreamCalled: false })
  t.equal(s.upstream.requests.length, 1, 'a lease is used once')
})

t.test('an ALLOW token creates its lease on first use: token and lease are one right', async (t) => {
  const s = await setup(t, 'pglite-memory') // deletes the lease row
  const a = await s.lease(refundRequest)
  const first = await s.execute({ ...refundRequest, token: a.token })
  t.equal(first.status, 200)
  t.match((await s.executeReceipts())[0], { detail: { via: 'token', leaseId: a.leaseId } })
  t.match((await s.execute({ ...refundRequest, token: a.token })).body, { reason: 'lease_used' })
  t.match((await s.execute({ ...refundRequest, leaseId: a.leaseId })).body, { reason: 'lease_used' })

  // A token whose check inserted no lease row in this database: the binding alone suffices.
  const b = await s.lease(refundRequest)
  await s.cp.database!.sql`delete from leases where id = ${b.leaseId}`
  t.equal((await s.execute({ ...refundRequest, token: b.token })).status, 200)
  t.equal(s.upstream.requests.length, 2)
})

t.test('every fail-closed reason: 200, a DENY receipt, and no upstream request', async (t) => {
  const s = await setup(t, 'pglite-memory') // plants another tenant's lease row
  const clock = s.clock as ManualClock
  const refuse = async (t: Test, body: Record<string, unknown>, reason: string, bearer = s.key) => {
    const r = await s.execute(body, bearer)
    t.equal(r.status, 200)
    t.same(Object.keys(r.body).sort(), ['ok', 'reason', 'receiptId', 'upstreamCalled'])
    t.match(r.body, { ok: false, reason, upstreamCalled: false, receiptId: /^rcp_/ })
    const receipt = (await s.executeReceipts()).find((x) => x.receiptId === r.body.receiptId)
    t.match(receipt, {
      kind: 'EXECUTE',
      decision: 'DENY',
      reason,
      detail: { phase: 'refused', upstreamCalled: false },
    })
    return r
  }

  t.test('lease_unknown: no such lease, or another tenant’s', async (t) => {
    await refuse(t, { ...refundRequest, leaseId: 'lse_doesnotexist000000000' }, 'lease_unknown')
    const stranger = await s.api.newTenant()
    const foreign = await s.api.post(
      '/v1/check',
      { verb: 'verify', request: { systemId: 'sys_billing', method: 'POST', path: '/v1/refunds' } },
      { bearer: stranger.apiKey },
    )
    t.equal(foreign.body.code, 'unknown_system', 'another tenant cannot even lease our system')
    // A lease of another tenant, for the same system id and the very same request.
    await s.cp.database!.sql`insert into leases (id, tenant_id, key_id, principal_id, verb, target, system_id,
                                                binding, created_at, expires_at)
      values ('lse_foreign0000000000000', ${stranger.tenantId}, ${stranger.keyId}, ${stranger.principalId},
              'verify', null, 'sys_billing', ${requestBinding('POST', '/v1/refunds', REFUND)}, 0, 9999999999)`
    await refuse(t, { ...refundRequest, leaseId: 'lse_foreign0000000000000' }, 'lease_unknown')
  })

  t.test('lease_mismatch: method, path, body and system are compared byte for byte', async (t) => {
    const l = await s.lease(refundRequest)
    for (const [what, body] of [
      ['lowercase method', { ...refundRequest, method: 'post' }],
      ['trailing slash', { ...refundRequest, path: '/v1/refunds/' }],
      ['another body', { ...refundRequest, body: { ...REFUND, amount: 501 } }],
      ['no body', { systemId: 'sys_billing', method: 'POST', path: '/v1/refunds' }],
      ['another system of the tenant', { ...refundRequest, systemId: 'sys_other' }],
    ] as const) {
      t.test(what, async (t) => {
        await refuse(t, { ...body, leaseId: l.leaseId }, 'lease_mismatch')
      })
    }
    t.test('a mismatch does not burn the lease', async (t) => {
      t.equal((await s.execute({ ...refundRequest, leaseId: l.leaseId })).status, 200)
    })
  })

  t.test('lease_used and lease_expired', async (t) => {
    const l = await s.lease(refundRequest)
    t.equal((await s.execute({ ...refundRequest, leaseId: l.leaseId })).status, 200)
    await refuse(t, { ...refundRequest, leaseId: l.leaseId }, 'lease_used')
    const old = await s.lease(refundRequest)
    clock.advance(60_000)
    await refuse(t, { ...refundRequest, leaseId: old.leaseId }, 'lease_expired')
    clock.advance(-60_000)
  })

  t.test('token_invalid: malformed, bad signature, wrong tenant, expired, unbound', async (t) => {
    const l = await s.lease(refundRequest)
    const [payload, sig] = l.token.slice(4).split('.') as [string, string]
    const claims = JSON.parse(Buffer.from(payload, 'base64url').toString())
    const forged = Buffer.from(JSON.stringify({ ...claims, bind: { ...claims.bind, h: 'f'.repeat(64) } }))
    await refuse(t, { ...refundRequest, token: 'wgt_nonsense' }, 'token_invalid')
    await refuse(
      t,
      { ...refundRequest, token: `wgt_${forged.toString('base64url')}.${sig}` },
      'token_invalid',
    )
    const stranger = await s.api.newTenant()
    const foreign = await s.api.post('/v1/check', { verb: 'verify' }, { bearer: stranger.apiKey })
    await refuse(t, { ...refundRequest, token: foreign.body.token }, 'token_invalid')
    const unbound = await s.api.post('/v1/check', { verb: 'verify' }, { bearer: s.key })
    await refuse(t, { ...refundRequest, token: unbound.body.token }, 'token_invalid')
    clock.advance(60_000)
    await refuse(t, { ...refundRequest, token: l.token }, 'token_invalid')
    clock.advance(-60_000)
    const rows = (await s.executeReceipts()).filter((r) => r.reason === 'token_invalid')
    t.same(
      rows.map((r) => r.detail.tokenReason),
      ['malformed', 'bad_signature', 'wrong_tenant', 'unbound', 'expired'],
    )
  })

  t.test('revoked: the lease’s key or the caller’s key, linearizable with the kill switch', async (t) => {
    const second = await s.api.post('/v1/keys', { email: s.tenant.email, scope: 'agent' }, { bearer: s.key })
    const agentKey = second.body.apiKey as string
    const l = await s.lease(refundRequest, agentKey)
    await s.api.post('/v1/revoke', { keyId: second.body.keyId }, { bearer: s.tenant.sponsorToken })
    // The caller's key is fine; the key the lease was decided for is not.
    const r = await refuse(t, { ...refundRequest, leaseId: l.leaseId }, 'revoked')
    const receipt = (await s.executeReceipts()).find((x) => x.receiptId === r.body.receiptId)
    t.match(receipt.detail.barred, { keyId: second.body.keyId, reason: 'sponsor_revoked_key' })
    await s.api.post('/v1/reinstate', { keyId: second.body.keyId }, { bearer: s.tenant.sponsorToken })

    // The caller's own key on the roster (still a live key, so it authenticates).
    const mine = await s.lease(refundRequest, agentKey)
    await s.api.post('/v1/revoke', { keyId: s.tenant.keyId }, { bearer: s.tenant.sponsorToken })
    await refuse(t, { ...refundRequest, leaseId: mine.leaseId }, 'revoked')
    await s.api.post('/v1/reinstate', { keyId: s.tenant.keyId }, { bearer: s.tenant.sponsorToken })

    // The whole tenant, with a token.
    const tok = await s.lease(refundRequest)
    clock.advance(1000)
    await s.api.post('/v1/revoke', { all: true }, { bearer: s.tenant.sponsorToken })
    await refuse(t, { ...refundRequest, token: tok.token }, 'revoked')
    clock.advance(1000)
    await s.api.post('/v1/reinstate', { all: true }, { bearer: s.tenant.sponsorToken })
    // Outstanding at the kill switch, the token stays revoked once it is lifted (contract §3).
    await refuse(t, { ...refundRequest, token: tok.token }, 'revoked')
    clock.advance(1000)
    const fresh = await s.lease(refundRequest)
    t.match(
      (await s.execute({ ...refundRequest, token: fresh.token })).body,
      { ok: true },
      'reinstated: a token issued since goes through',
    )
  })

  t.test('no upstream request for any refusal above', async (t) => {
    const expected = 3 // the three successful executes in the subtests
    t.equal(s.upstream.requests.length, expected)
    t.equal(s.other.requests.length, 0)
  })
})

t.test('gate_error: an unreachable hot store fails closed with a receipt', async (t) => {
  const { createMemoryHotStore } = await import('../../src/store/memory/hot-store.js')
  const inner = createMemoryHotStore()
  let broken = false
  const hot = {
    ...inner,
    commit: async (req: Parameters<typeof inner.commit>[0]) => {
      if (broken) throw new Error('hot store unreachable')
      return inner.commit(req)
    },
  }
  const s = await setup(t, 'fake', { hot })
  const l = await s.lease(refundRequest)
  broken = true
  const r = await s.execute({ ...refundRequest, leaseId: l.leaseId })
  t.match(r.body, { ok: false, reason: 'gate_error', upstreamCalled: false, receiptId: /^rcp_/ })
  t.match((await s.executeReceipts())[0], { decision: 'DENY', reason: 'gate_error' })
  t.equal(s.upstream.requests.length, 0)
  broken = false
  t.equal(
    (await s.execute({ ...refundRequest, leaseId: l.leaseId })).status,
    200,
    'the lease was not used up',
  )
})

t.test('no receipt, no write: when the audit log cannot commit, the upstream is never called', async (t) => {
  const s = await setup(t, 'pglite-memory') // a trigger refuses the receipts
  const l = await s.lease(refundRequest)
  // Any append to the receipts table now fails, as a full disk or a lost primary would.
  await s.cp.database!.sql`create function refuse_receipts() returns trigger language plpgsql as
    $$ begin raise exception 'audit log unavailable'; end $$`
  await s.cp.database!.sql`create trigger refuse_receipts before insert on receipts
    for each row execute function refuse_receipts()`
  const r = await s.execute({ ...refundRequest, leaseId: l.leaseId })
  t.equal(r.status, 503)
  t.match(r.body, { code: 'gate_unavailable', ok: false, reason: 'gate_error', upstreamCalled: false })
  t.equal(s.upstream.requests.length, 0)
  const [row] = await s.cp.database!.sql`select used_at from leases where id = ${l.leaseId}`
  t.equal(row?.used_at, null, 'the lease is not used up by a write that did not happen')
})

t.test('bad input is 400 or 413, before any lease is looked at', async (t) => {
  const s = await setup(t)
  const l = await s.lease(refundRequest)
  const base = { ...refundRequest, leaseId: l.leaseId }
  const cases: [string, Record<string, unknown>, number, string][] = [
    ['no systemId', { ...base, systemId: undefined }, 400, 'invalid_request'],
    ['no method', { ...base, method: undefined }, 400, 'invalid_request'],
    ['no path', { ...base, path: undefined }, 400, 'invalid_request'],
    ['neither leaseId nor token', { ...base, leaseId: undefined }, 400, 'invalid_request'],
    ['both leaseId and token', { ...base, token: l.token }, 400, 'invalid_request'],
    ['an unknown system', { ...base, systemId: 'sys_nope' }, 400, 'unknown_system'],
    ['a path outside /v1/', { ...base, path: '/v2/refunds' }, 400, 'invalid_request'],
    ['a body that is an array', { ...base, body: [1, 2] }, 400, 'invalid_request'],
    ['a body that is a string', { ...base, body: 'x' }, 400, 'invalid_request'],
    ['a body that is null', { ...base, body: null }, 400, 'invalid_request'],
    ['an unknown field', { ...base, headers: { host: 'evil' } }, 400, 'invalid_request'],
    [
      'a header-breaking idempotency key',
      { ...base, idempotencyKey: 'a\r\nx-evil: 1' },
      400,
      'invalid_request',
    ],
  ]
  for (const [what, body, status, code] of cases) {
    const r = await s.execute(body)
    t.same([r.status, r.body.code], [status, code], what)
  }
  t.equal((await s.executeReceipts()).length, 0, 'no receipt for malformed input')

  const big = (n: number) => ({ ...base, body: { blob: 'x'.repeat(n - '{"blob":""}'.length) } })
  const over = await s.execute(big(1024 * 1024 + 1))
  t.same([over.status, over.body.code], [413, 'payload_too_large'], 'one byte over 1 MiB of JCS')
  const atLimit = await s.execute(big(1024 * 1024))
  t.equal(atLimit.status, 200, 'exactly 1 MiB plus its envelope is accepted ...')
  t.match(atLimit.body, { reason: 'lease_mismatch' }, '... and judged against the lease')
  t.equal(s.upstream.requests.length, 0)
  t.equal((await s.execute(base)).status, 200, 'the lease survived all of it')
})

t.test('who may execute: API keys of any scope; not a sponsor token, not a dead key', async (t) => {
  const s = await setup(t)
  const agent = await s.api.post('/v1/keys', { email: s.tenant.email, scope: 'agent' }, { bearer: s.key })
  const l = await s.lease(refundRequest, agent.body.apiKey)
  t.equal((await s.execute({ ...refundRequest, leaseId: l.leaseId }, s.tenant.sponsorToken)).status, 401)
  t.equal((await s.execute({ ...refundRequest, leaseId: l.leaseId }, agent.body.apiKey)).status, 200)
  const p = await s.api.post('/v1/principals', { name: 'retired-bot' }, { bearer: s.key })
  const dead = await s.api.post(
    '/v1/keys',
    { email: s.tenant.email, principal_id: p.body.principalId },
    { bearer: s.key },
  )
  await s.api.patch(`/v1/principals/${p.body.principalId}`, { disabled: true }, { bearer: s.key })
  const r = await s.execute({ ...refundRequest, leaseId: l.leaseId }, dead.body.apiKey)
  t.same([r.status, r.body.error], [401, 'unknown API key'])
})

t.test('upstream answers and failures are reported as they are', async (t) => {
  /** One execute against `s`, whose upstream answers with `respond`: the answer and its outcome receipt. */
  const runOn =
    (s: Awaited<ReturnType<typeof setup>>) => async (respond: Parameters<RecordingServer['respond']>[0]) => {
      s.upstream.respond(respond)
      const l = await s.lease(refundRequest)
      const r = await s.execute({ ...refundRequest, leaseId: l.leaseId })
      const receipts = await s.executeReceipts()
      return { r, outcome: receipts.at(-1) }
    }
  // The default headers timeout: what these upstreams answer is theirs, however loaded the machine.
  const s = await setup(t, 'fake', { settings: { execute: { maxResponseBytes: 2048 } } })
  const run = runOn(s)

  t.test('a 5xx is 502 upstream_error, recorded with its status', async (t) => {
    const { r, outcome } = await run((_q, res) => {
      res.writeHead(503, { 'content-type': 'text/plain' }).end('down for maintenance')
    })
    t.equal(r.status, 502)
    t.match(r.body, {
      code: 'upstream_error',
      ok: false,
      reason: 'upstream_error',
      upstreamCalled: true,
      status: 503,
      failure: 'upstream_5xx',
      timeout: false,
      receiptId: r.headers['x-writegate-receipt'],
      outcomeReceiptId: outcome.receiptId,
    })
    t.match(outcome, {
      decision: 'ALLOW',
      detail: { phase: 'completed', outcome: 'upstream_error', status: 503 },
    })
  })

  t.test('a timeout is 502 with timeout: true', async (t) => {
    // A short headers timeout, on a bench of its own: the upstream answers long after it.
    const run = runOn(await setup(t, 'fake', { settings: { execute: { headersTimeoutMs: 300 } } }))
    const { r, outcome } = await run(async (_q, res) => {
      await new Promise((resolve) => setTimeout(resolve, 1500))
      res.writeHead(200).end('{}')
    })
    t.equal(r.status, 502)
    t.match(r.body, { upstreamCalled: true, status: null, failure: 'headers_timeout', timeout: true })
    t.match(outcome.detail, { outcome: 'upstream_error', failure: 'headers_timeout', timeout: true })
  })

  t.test('an oversized answer is cut off and reported', async (t) => {
    // Answered 200: the write happened; its body is not relayed, and a header says why.
    const { r } = await run((_q, res) => {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ x: 'y'.repeat(4096) }))
    })
    t.same(
      [r.status, r.headers['x-writegate-upstream-status'], r.headers['x-writegate-upstream-incomplete']],
      [200, '200', 'response_too_large'],
    )
    // Answered 500: the upstream failed, and the write's fate is unknown, as any 5xx's.
    const failed = await run((_q, res) => {
      res.writeHead(500, { 'content-type': 'application/json' }).end(JSON.stringify({ x: 'y'.repeat(4096) }))
    })
    t.match([failed.r.status, failed.r.body.failure, failed.r.body.status], [502, 'response_too_large', 500])
  })

  t.test(
    '4xx and 3xx are the upstream’s answer: 200, status in a header, redirects not followed',
    async (t) => {
      const unprocessable = await run((_q, res) => {
        res.writeHead(422, { 'content-type': 'application/json' }).end('{"error":"amount too large"}')
      })
      t.same(
        [
          unprocessable.r.status,
          unprocessable.r.headers['x-writegate-upstream-status'],
          unprocessable.r.body,
        ],
        [200, '422', { error: 'amount too large' }],
      )
      const before = s.other.requests.length
      const redirected = await run((_q, res) => {
        res.writeHead(307, { location: `${s.other.origin}/v1/refunds` }).end()
      })
      t.equal(redirected.r.status, 200)
      t.equal(redirected.r.headers['x-writegate-upstream-status'], '307')
      t.equal(redirected.r.headers['x-writegate-upstream-location'], `${s.other.origin}/v1/refunds`)
      t.equal(s.other.requests.length, before, 'the redirect target was never contacted')
      t.match(redirected.outcome.detail, { status: 307, location: `${s.other.origin}/v1/refunds` })
    },
  )

  t.test(
    'an answer that carries back the injected credential is not relayed, nor put on record',
    async (t) => {
      const echoes: [string, Parameters<RecordingServer['respond']>[0], string][] = [
        [
          'in the body',
          (q, res) => {
            res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(q.headers))
          },
          'credential_echoed',
        ],
        [
          'in a redirect, percent-encoded',
          (_q, res) => {
            res.writeHead(303, { location: `https://x.example/?t=${encodeURIComponent(CREDENTIAL_SECRET)}` })
            res.end()
          },
          'credential_echoed',
        ],
        [
          'in a redirect whose body then outgrows the limit',
          (_q, res) => {
            res.writeHead(302, {
              location: `https://x.example/?t=${CREDENTIAL_SECRET}`,
              'content-type': 'text/html',
            })
            res.end('x'.repeat(5000))
          },
          'credential_echoed',
        ],
        [
          'compressed by a transfer coding',
          (_q, res) => {
            res.writeHead(200, { 'content-type': 'application/json', 'transfer-encoding': 'gzip, chunked' })
            res.end('\x1f\x8b...')
          },
          'answer_compressed',
        ],
        [
          'compressed, though asked for identity',
          (_q, res) => {
            res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip' })
            res.end('\x1f\x8b...')
          },
          'answer_compressed',
        ],
      ]
      for (const [name, respond, expected] of echoes) {
        const { r, outcome } = await run(respond)
        t.equal(
          s.upstream.requests.at(-1)?.headers['accept-encoding'],
          'identity',
          `${name}: asked uncompressed`,
        )
        const told = JSON.stringify([r.headers, r.body, outcome])
        t.equal(r.status, 200, `${name}: the write happened`)
        t.equal(r.headers['x-writegate-upstream-incomplete'], expected, name)
        t.equal(r.headers['x-writegate-upstream-location'], undefined, `${name}: no location`)
        t.match(outcome.detail, { outcome: 'response', upstreamCalled: true, responseIncomplete: expected })
        t.notOk(
          told.includes(CREDENTIAL_SECRET) || told.includes(encodeURIComponent(CREDENTIAL_SECRET)),
          name,
        )
      }
    },
  )
})

t.test('a refused connection: 502, upstreamCalled false', async (t) => {
  // A port that was just free: nothing listens on it.
  const probe = createNetServer()
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve))
  const port = (probe.address() as AddressInfo).port
  await new Promise((resolve) => probe.close(resolve))
  const { api, tenant } = await startWithTenantSystems(t, 'fake', (tenantId) =>
    billingSystems(tenantId, `http://127.0.0.1:${port}`),
  )
  const c = await api.post('/v1/check', { verb: 'verify', request: refundRequest }, { bearer: tenant.apiKey })
  const r = await api.post(
    '/v1/execute',
    { ...refundRequest, leaseId: c.body.leaseId },
    { bearer: tenant.apiKey },
  )
  t.equal(r.status, 502)
  t.match(r.body, { upstreamCalled: false, failure: 'connect_failed', status: null })
})

t.test('SSRF: no request shape reaches any host but the enrolled origin', async (t) => {
  const s = await setup(t)
  const attacker = await startRecordingServer(t)
  const evil = `127.0.0.1:${attacker.port}`
  const l = await s.lease(refundRequest)

  const unsafe = [
    `http://${evil}/v1/refunds`,
    `//${evil}/v1/refunds`,
    `/v1/%2e%2e/%2e%2e/${evil}`,
    '/v1/%2E%2E/admin',
    '/v1/..%2f..%2fadmin',
    '/v1/..%2F',
    '/v1\\..\\admin',
    '/v1/\\\\evil/x',
    '/v1/../admin',
    '/v1/./refunds',
    '/v1//refunds',
    `/v1//${evil}/x`,
    '/v1/refunds%00',
    '/v1/refunds%252e%252e',
    '/v1/a b',
    '/v1/refunds#frag',
    '/v1/r\u00e9funds',
  ]
  for (const path of unsafe) {
    const r = await s.execute({ ...refundRequest, path, leaseId: l.leaseId })
    t.equal(r.status, 400, `refused: ${JSON.stringify(path)}`)
    t.ok(['unsafe_path', 'invalid_request'].includes(r.body.code), r.body.code)
    const c = await s.api.post(
      '/v1/check',
      { verb: 'verify', request: { ...refundRequest, path } },
      { bearer: s.key },
    )
    t.equal(c.status, 400, `no lease is ever issued for ${JSON.stringify(path)}`)
  }

  // Shapes that are valid paths still go to the enrolled origin, and only there.
  const atTrick = `/v1/@${evil}/refunds`
  const queryUrl = `/v1/refunds?next=http://${evil}/steal`
  for (const path of [atTrick, queryUrl]) {
    const lp = await s.lease({ ...refundRequest, path })
    const r = await s.execute({ ...refundRequest, path, leaseId: lp.leaseId })
    t.equal(r.status, 200, path)
  }
  const withUrlBody = { ...REFUND, callback: `http://${evil}/hook`, url: `//${evil}/x` }
  const lb = await s.lease({ ...refundRequest, body: withUrlBody })
  t.equal((await s.execute({ ...refundRequest, body: withUrlBody, leaseId: lb.leaseId })).status, 200)

  t.same(
    s.upstream.requests.map((r) => r.url),
    [atTrick, queryUrl, '/v1/refunds'],
    'the enrolled upstream got exactly the leased paths',
  )
  t.equal(attacker.requests.length, 0, 'the attacker received nothing')
  t.equal(s.other.requests.length, 0)
})

for (const kind of API_BACKENDS) {
  t.test(`a lease is consumed exactly once under 20 concurrent executes on ${kind}`, async (t) => {
    const s = await setup(t, kind)
    s.upstream.respond(async (_q, res) => {
      await new Promise((resolve) => setTimeout(resolve, 50))
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"id":"re_1"}')
    })
    const l = await s.lease(refundRequest)
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        s.execute(
          i % 2 === 0 ? { ...refundRequest, leaseId: l.leaseId } : { ...refundRequest, token: l.token },
        ),
      ),
    )
    t.equal(results.filter((r) => r.status === 200 && r.body.id === 're_1').length, 1, 'one success')
    t.equal(results.filter((r) => r.body.reason === 'lease_used').length, 19, 'nineteen lease_used')
    t.equal(s.upstream.requests.length, 1, 'exactly one upstream request')
    const receipts = await s.executeReceipts()
    t.same(
      receipts.filter((r) => r.decision === 'ALLOW').map((r) => r.detail.phase),
      ['authorized', 'completed'],
      'one write: its authorisation and its outcome',
    )
    t.equal(receipts.filter((r) => r.decision === 'DENY').length, 19)
  })
}

t.test('the OpenAPI document describes execute and agent actions', async (t) => {
  const s = await setup(t)
  const doc = (await s.api.get('/v1/openapi.json')).body
  const execute = doc.paths['/v1/execute'].post
  t.same(Object.keys(execute.requestBody.content['application/json'].schema.properties).sort(), [
    'body',
    'idempotencyKey',
    'leaseId',
    'method',
    'path',
    'systemId',
    'token',
  ])
  t.ok(execute.responses['200'] && execute.responses['502'])
  t.ok(doc.paths['/v1/agent/actions'].get.responses['200'])
  const approve = doc.paths['/v1/agent/actions/{actionId}/approve'].post
  t.same(Object.keys(approve.responses['200'].content['application/json'].schema.properties).sort(), [
    'message',
    'receipt',
    'result',
    'revertActionId',
    'revertMessage',
    'type',
  ])
})

t.test('a gated write counts once on the badge: its outcome receipt is not a second write', async (t) => {
  const s = await setup(t)
  const badge = (await s.api.post('/v1/badge/tokens', {}, { bearer: s.key })).body.badgeToken
  const l = await s.lease(refundRequest)
  t.equal((await s.execute({ ...refundRequest, leaseId: l.leaseId })).status, 200)
  t.equal((await s.executeReceipts()).length, 2, 'authorising and outcome receipts')
  const svg = await s.api.get(`/v1/badge/${badge}.svg`)
  t.ok(String(svg.body).includes('>2 / 30d<'), 'the CHECK and one EXECUTE')
})

t.test("a write cannot be leased under a verb of the agent's choosing (policy refund: deny)", async (t) => {
  const s = await setup(t)
  await s.api.put('/v1/policy', { refund: 'deny', verify: 'allow' }, { bearer: s.key })
  const agent = await s.api.post('/v1/keys', { email: s.tenant.email, scope: 'agent' }, { bearer: s.key })
  const request = { systemId: 'sys_billing', method: 'POST', path: '/v1/payouts', body: { amount: 500 } }
  const spoof = await s.api.post('/v1/check', { verb: 'verify', request }, { bearer: agent.body.apiKey })
  t.same([spoof.status, spoof.body.code], [400, 'verb_mismatch'])
  t.notOk(spoof.body.leaseId)
  const honest = await s.api.post('/v1/check', { verb: 'refund', request }, { bearer: agent.body.apiKey })
  t.match(honest.body, { decision: 'DENY', reason: 'policy_deny' })
  t.notOk(honest.body.leaseId)
  t.equal(s.upstream.requests.length, 0, 'the upstream received nothing')
})

t.test('a grant for one target does not pay for a write whose route reads no target', async (t) => {
  const s = await setup(t)
  await s.api.put('/v1/policy', { refund: 'require_grant' }, { bearer: s.key })
  await s.api.post('/v1/grants', { verb: 'refund', target: 'ch_small_1' }, { bearer: s.tenant.sponsorToken })
  // POST /v1/payouts is a refund whose route names no target: the agent names the granted one.
  const payout = {
    systemId: 'sys_billing',
    method: 'POST',
    path: '/v1/payouts',
    body: { charge: 'ch_BIG', amount: 99999999 },
  }
  const r = await s.api.post(
    '/v1/check',
    { verb: 'refund', target: 'ch_small_1', request: payout },
    { bearer: s.key },
  )
  t.equal(r.body.decision, 'DENY', 'the grant is not spent on it')
  t.equal(r.body.reason, 'grant_required')
  t.notOk(r.body.leaseId, 'no lease to send it with')
  t.equal(s.upstream.requests.length, 0)
})
