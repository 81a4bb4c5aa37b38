import { createServer } from 'node:http'
import { type AddressInfo, createServer as createNetServer } from 'node:net'
import { generate } from 'otplib'
import t, { type Test } from 'tap'
import type { ManualClock } from '../../src/core/clock.js'
import { canonicalJson } from '../../src/core/jcs.js'
import { API_BACKENDS } from '../helpers/backends.js'
import {
  type StartOptions,
  startWithTenantSystems,
  storedReceipts,
  type TestStorageKind,
} from '../helpers/control-plane.js'
import { billingSystems, CREDENTIAL_SECRET, startRecordingServer } from '../helpers/enrolled-systems.js'
import { agentRequest, startEmbeddedProxy, waitReady } from '../helpers/proxy.js'
import { BILLING_CREDENTIALS, billingSystems as proxySystems } from '../helpers/proxy-fixtures.js'

const REFUND = { charge: 'ch_1', amount: 500 }

async function setup(
  t: Test,
  kind: TestStorageKind = 'fake',
  opts: StartOptions = {},
  /** sys_billing's origin, when it is not the recording server's. */
  origin?: string,
) {
  const upstream = await startRecordingServer(t)
  const started = await startWithTenantSystems(
    t,
    kind,
    (tenantId) => billingSystems(tenantId, origin ?? upstream.origin),
    opts,
  )
  const { api, cp, tenant } = started
  const clock = started.clock as ManualClock
  const admin = tenant.apiKey
  const agentKey = await api.post('/v1/keys', { email: tenant.email, scope: 'agent' }, { bearer: admin })
  const agent = agentKey.body.apiKey as string
  const seconds = () => Math.floor(clock.nowMs() / 1000)
  /** The tenant's authenticator code `offset` seconds from now. */
  const code = (offset = 0) => generate({ secret: tenant.totp.secret, epoch: seconds() + offset })
  /** The agent asks for a refund; the default policy says STEP_UP, so the call is staged. */
  const stage = async (params: Record<string, unknown> = REFUND, tool = 'issue_refund') => {
    const r = await api.post(
      '/v1/check',
      { verb: 'refund', target: String(params.charge ?? ''), tool: { name: tool, params } },
      { bearer: agent },
    )
    if (!r.body.actionId) throw new Error(`not staged: ${JSON.stringify(r.body)}`)
    return r.body.actionId as string
  }
  const approve = (actionId: string, body?: Record<string, unknown>, bearer = admin) =>
    api.post(`/v1/agent/actions/${actionId}/approve`, body, { bearer })
  const list = async () =>
    (await api.get('/v1/agent/actions', { bearer: admin })).body.actions as { actionId: string }[]
  const receipts = () => storedReceipts(cp, tenant.tenantId)
  return {
    ...started,
    clock,
    upstream,
    admin,
    agent,
    agentKeyId: agentKey.body.keyId as string,
    code,
    stage,
    approve,
    list,
    receipts,
  }
}

t.test(
  'listing: admin keys see pending, unexpired actions; agent keys may not list or approve',
  async (t) => {
    const s = await setup(t)
    const first = await s.stage()
    s.clock.advance(1000)
    const second = await s.stage({ charge: 'ch_2', amount: 7 })
    const r = await s.api.get('/v1/agent/actions', { bearer: s.admin })
    t.equal(r.status, 200)
    t.equal(r.body.tenantId, s.tenant.tenantId)
    t.same(
      r.body.actions.map((a: { actionId: string }) => a.actionId),
      [first, second],
      'oldest first',
    )
    t.match(r.body.actions[0], {
      systemId: 'sys_billing',
      tool: 'issue_refund',
      verb: 'refund',
      target: 'ch_1',
      params: REFUND,
      keyId: s.agentKeyId,
      stagedReceiptId: /^rcp_/,
      revertOf: null,
      expiresAt: Math.floor(s.clock.nowMs() / 1000) - 1 + 900,
    })
    t.notOk(JSON.stringify(r.body).includes(CREDENTIAL_SECRET), 'no credential in the listing')
    const asAgent = await s.api.get('/v1/agent/actions', { bearer: s.agent })
    t.same([asAgent.status, asAgent.body.code], [403, 'insufficient_scope'])
    const agentApproves = await s.approve(first, { totpCode: await s.code() }, s.agent)
    t.same([agentApproves.status, agentApproves.body.code], [403, 'insufficient_scope'])
    t.equal((await s.approve(first, { totpCode: await s.code() }, s.tenant.sponsorToken)).status, 401)

    const other = await s.api.newTenant()
    t.same(
      (await s.api.get('/v1/agent/actions', { bearer: other.apiKey })).body.actions,
      [],
      'tenant isolation',
    )
    const foreign = await s.approve(first, { totpCode: await s.code() }, other.apiKey)
    t.same([foreign.status, foreign.body.code], [404, 'action_not_found'])

    s.clock.advance(15 * 60 * 1000)
    t.same(await s.list(), [], 'expired actions are not listed')
    const expired = await s.approve(first, { totpCode: await s.code() })
    t.same([expired.status, expired.body.code], [404, 'action_not_found'])
    t.same((await s.approve('act_doesnotexist', {})).status, 404)
    t.equal(s.upstream.requests.length, 0)
  },
)

for (const kind of API_BACKENDS) {
  t.test(`listing pages: limit and an opaque after cursor, oldest first, on ${kind}`, async (t) => {
    const s = await setup(t, kind)
    type Page = { actions: { actionId: string }[]; nextAfter: string | null }
    const page = async (query: string) => {
      const r = await s.api.get(`/v1/agent/actions${query}`, { bearer: s.admin })
      t.equal(r.status, 200, query)
      return r.body as Page
    }
    // Seven actions, three staged in one second (the order then falls back to the action id).
    const staged: string[] = []
    for (let i = 0; i < 7; i++) {
      staged.push(await s.stage({ charge: `ch_${i}`, amount: i + 1 }))
      if (i % 3 === 2) s.clock.advance(1000)
    }
    const all = await page('')
    t.equal(all.actions.length, 7, 'the default page holds them all')
    t.equal(all.nextAfter, null, 'and says it is the last')
    const order = all.actions.map((a) => a.actionId)
    t.same([...order].sort(), [...staged].sort())

    const first = await page('?limit=3')
    t.same(
      first.actions.map((a) => a.actionId),
      order.slice(0, 3),
    )
    t.type(first.nextAfter, 'string')
    // The action the cursor points at is approved (which stages its undo, the newest action)
    // before the next page is read: the list resumes after it all the same.
    const gone = first.actions[2]?.actionId as string
    const approved = await s.approve(gone, { totpCode: await s.code() })
    t.equal(approved.status, 200)
    const after = (await page('')).actions.map((a) => a.actionId).slice(2)
    t.same(
      [...after].sort(),
      [...order.slice(3), approved.body.revertActionId].sort(),
      'what follows the cursor now',
    )
    const second = await page(`?limit=3&after=${first.nextAfter}`)
    t.same(
      second.actions.map((a) => a.actionId),
      after.slice(0, 3),
    )
    const third = await page(`?limit=3&after=${second.nextAfter}`)
    t.same(
      third.actions.map((a) => a.actionId),
      after.slice(3),
    )
    t.equal(third.nextAfter, null, 'a short page is the last')
    const exact = await page(`?limit=2&after=${second.nextAfter}`)
    t.same(
      exact.actions.map((a) => a.actionId),
      after.slice(3),
    )
    t.equal(exact.nextAfter, null, 'a full page with nothing after it is the last too')

    // More than the default page of 100 (inserted directly: staging each by check would spend
    // the key's monthly quota).
    const now = Math.floor(s.clock.nowMs() / 1000)
    for (let i = 0; i < 101; i++)
      await s.cp.database!
        .sql`insert into pending_actions (id, tenant_id, system_id, tool, params, verb, target,
                                environment, principal_id, key_id, staged_receipt_id, created_at, expires_at)
                              values (${`act_bulk${String(i).padStart(4, '0')}`}, ${s.tenant.tenantId}, 'sys_billing',
                                      'issue_refund', ${s.cp.database!.sql.json({})}, 'refund', null, null,
                                      ${s.tenant.principalId}, ${s.agentKeyId}, 'rcp_x', ${now + 10}, ${now + 900})`
    const big = await page('')
    t.equal(big.actions.length, 100, 'the default limit is 100')
    t.type(big.nextAfter, 'string')
    const rest = await page(`?after=${big.nextAfter}`)
    t.equal(rest.actions.length, 108 - 100)
    t.equal(rest.nextAfter, null)
    t.equal(new Set([...big.actions, ...rest.actions].map((a) => a.actionId)).size, 108, 'no repeats')
    t.equal((await page('?limit=1000')).actions.length, 108)
  })
}

t.test('listing: a bad limit or cursor is a 400 JSON error', async (t) => {
  const s = await setup(t)
  const cursor = (text: string) => Buffer.from(text).toString('base64url')
  for (const query of [
    'limit=0',
    'limit=1001',
    'limit=abc',
    'limit=1.5',
    'limit=-1',
    'after=',
    'after=not-a-cursor',
    `after=${cursor('12.act_x')}.`,
    `after=${cursor('act_x')}`,
    `after=${cursor('12.act x')}`,
    `after=${'A'.repeat(200)}`,
  ]) {
    const r = await s.api.get(`/v1/agent/actions?${query}`, { bearer: s.admin })
    t.equal(r.status, 400, query)
    t.equal(r.body.code, 'invalid_request', query)
    t.match(r.body.error, /^invalid querystring: (limit|after)/, query)
  }
})

t.test('approving with a TOTP code: the write, its receipts, the action gone, the undo staged', async (t) => {
  const s = await setup(t)
  const actionId = await s.stage()
  s.upstream.respond((_q, res) => {
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"id":"re_77","status":"succeeded"}')
  })
  const r = await s.approve(actionId, { totpCode: await s.code() })
  t.equal(r.status, 200)
  t.same(Object.keys(r.body).sort(), [
    'message',
    'receipt',
    'result',
    'revertActionId',
    'revertMessage',
    'type',
  ])
  t.match(r.body, {
    type: 'executed',
    message: /issue_refund/,
    result: {
      ok: true,
      upstreamCalled: true,
      status: 200,
      contentType: 'application/json',
      body: { id: 're_77', status: 'succeeded' },
    },
    receipt: {
      receiptId: /^rcp_/,
      kind: 'ACTION_APPROVED',
      seq: Number,
      hash: /^[0-9a-f]{64}$/,
      executeReceiptId: /^rcp_/,
      outcomeReceiptId: /^rcp_/,
    },
    revertActionId: /^act_/,
    revertMessage: /approve action act_\w+ \(cancel_refund\)/,
  })

  t.equal(s.upstream.requests.length, 1)
  const seen = s.upstream.requests[0]!
  t.equal(seen.method, 'POST')
  t.equal(seen.url, '/v1/refunds')
  t.equal(seen.body, canonicalJson(REFUND))
  t.equal(seen.headers.authorization, `Bearer ${CREDENTIAL_SECRET}`)
  t.equal(seen.headers['idempotency-key'], actionId, 'the action id is the idempotency key')
  t.equal(seen.headers['x-writegate-receipt'], r.body.receipt.executeReceiptId)

  const all = await s.receipts()
  const tail = all.slice(-4)
  t.same(
    tail.map((x) => [x.kind, x.decision, x.detail.phase ?? null]),
    [
      ['ACTION_APPROVED', null, null],
      ['EXECUTE', 'ALLOW', 'authorized'],
      ['EXECUTE', 'ALLOW', 'completed'],
      ['ACTION_STAGED', null, null],
    ],
  )
  t.match(tail[0], {
    receiptId: r.body.receipt.receiptId,
    keyId: s.tenant.keyId,
    target: 'ch_1',
    detail: {
      actionId,
      tool: 'issue_refund',
      params: REFUND,
      verification: 'totp',
      agent: { keyId: s.agentKeyId },
      recheck: { decision: 'STEP_UP' },
    },
  })
  t.match(tail[1], { receiptId: r.body.receipt.executeReceiptId, detail: { actionId, via: 'token' } })
  t.match(tail[2], {
    receiptId: r.body.receipt.outcomeReceiptId,
    kind: 'EXECUTE',
    decision: 'ALLOW',
    detail: { phase: 'completed', status: 200 },
  })
  t.match(tail[3].detail, {
    actionId: r.body.revertActionId,
    tool: 'cancel_refund',
    params: { refund: 're_77' },
    revertOf: { actionId, executeReceiptId: r.body.receipt.executeReceiptId },
  })

  const again = await s.approve(actionId, { totpCode: await s.code(30) })
  t.same([again.status, again.body.code], [404, 'action_not_found'], 'an approved action is gone')
  const pending = await s.list()
  t.same(
    pending.map((a) => a.actionId),
    [r.body.revertActionId],
  )
  t.match(pending[0], { revertOf: actionId, tool: 'cancel_refund', keyId: s.agentKeyId })

  // The undo is an action like any other: approve it (with a fresh code) and it runs.
  const undo = await s.approve(r.body.revertActionId, { totpCode: await s.code(30) })
  t.match(undo.body, { type: 'executed', revertActionId: null, revertMessage: null })
  t.equal(s.upstream.requests[1]?.url, '/v1/refunds/re_77/cancel')
  t.equal(s.upstream.requests[1]?.body, '', 'no params left for the body')
  t.equal(s.upstream.requests[1]?.headers['idempotency-key'], r.body.revertActionId)
})

t.test('TOTP: one step of drift either way, a code works once (RFC 6238)', async (t) => {
  const s = await setup(t)
  const ids = await Promise.all([1, 2, 3, 4].map((n) => s.stage({ charge: `ch_${n}`, amount: n })))
  const invalid = async (id: string, totpCode: string, reason: string) => {
    const r = await s.approve(id, { totpCode })
    t.same([r.status, r.body.code, r.body.reason], [401, 'totp_invalid', reason], `${totpCode}: ${reason}`)
  }
  await invalid(ids[0]!, await s.code(-60), 'wrong_code')
  await invalid(ids[0]!, await s.code(60), 'wrong_code')
  const previous = await s.code(-30)
  t.equal((await s.approve(ids[0]!, { totpCode: previous })).body.type, 'executed', 'the previous step')
  await invalid(ids[1]!, previous, 'replayed')
  t.equal((await s.approve(ids[1]!, { totpCode: await s.code() })).body.type, 'executed', 'the current step')
  const next = await s.code(30)
  t.equal((await s.approve(ids[2]!, { totpCode: next })).body.type, 'executed', 'the next step')
  await invalid(ids[3]!, next, 'replayed')
  await invalid(ids[3]!, await s.code(), 'replayed')
  s.clock.advance(60_000)
  t.equal((await s.approve(ids[3]!, { totpCode: await s.code() })).body.type, 'executed', 'a later step')
  t.equal(s.upstream.requests.length, 4)
})

t.test('no code, a wrong code, a used backup code: 401 and nothing written', async (t) => {
  const s = await setup(t)
  const id = await s.stage()
  const before = (await s.receipts()).length
  const none = await s.approve(id, {})
  t.same([none.status, none.body.code], [401, 'totp_required'])
  const empty = await s.approve(id, undefined)
  t.same([empty.status, empty.body.code], [401, 'totp_required'], 'an empty body too')
  const wrong = await s.approve(id, { totpCode: '000000' === (await s.code()) ? '111111' : '000000' })
  t.same([wrong.status, wrong.body.code], [401, 'totp_invalid'])
  const junk = await s.approve(id, { totpCode: 'letmein' })
  t.same([junk.status, junk.body.code], [401, 'totp_invalid'])
  t.same(
    (await s.receipts()).slice(before).map((r) => [r.kind, r.detail.failure]),
    [
      ['APPROVAL_FAILED', 'wrong_code'],
      ['APPROVAL_FAILED', 'wrong_code'],
    ],
    'no code: no receipt; each refused code: APPROVAL_FAILED, and nothing else',
  )
  t.equal(s.upstream.requests.length, 0)

  const backup = s.tenant.totp.backupCodes[3] as string
  const ok = await s.approve(id, { totpCode: backup.toLowerCase() })
  t.equal(ok.body.type, 'executed', 'a backup code works (case and dash do not matter)')
  t.match(
    (await s.receipts()).find((r) => r.kind === 'ACTION_APPROVED'),
    {
      detail: { verification: 'backup_code' },
    },
  )
  const id2 = await s.stage()
  const reused = await s.approve(id2, { totpCode: backup })
  t.same([reused.status, reused.body.code], [401, 'totp_invalid'], 'once')
  t.equal(s.upstream.requests.length, 1)
})

t.test('params edits are merged, re-validated, and the re-checked target follows them', async (t) => {
  const s = await setup(t)
  const id = await s.stage()
  for (const [what, params, path] of [
    ['an unknown key', { currency: 'eur' }, 'currency'],
    ['an invalid value', { amount: 0 }, 'amount'],
    ['a value breaking the pattern', { charge: 'not-a-charge' }, 'charge'],
  ] as const) {
    const r = await s.approve(id, { totpCode: await s.code(), params })
    t.same([r.status, r.body.code], [400, 'invalid_params'], what)
    t.match(r.body.issues, [{ path }])
  }
  const strict = await s.approve(id, { totpCode: await s.code(), bogus: 1 })
  t.same([strict.status, strict.body.code], [400, 'invalid_request'], 'the body is strict')
  t.equal(s.upstream.requests.length, 0)

  const r = await s.approve(id, { totpCode: await s.code(), params: { charge: 'ch_9', amount: 250 } })
  t.equal(r.body.type, 'executed')
  t.equal(s.upstream.requests[0]?.body, canonicalJson({ amount: 250, charge: 'ch_9' }))
  t.match(
    (await s.receipts()).find((x) => x.kind === 'ACTION_APPROVED'),
    {
      target: 'ch_9',
      detail: { params: { charge: 'ch_9', amount: 250 }, editedParams: ['charge', 'amount'] },
    },
  )
})

t.test('the re-check decides: deny stops the write, allow needs no code, a grant is used', async (t) => {
  const s = await setup(t)
  const id = await s.stage()
  const id2 = await s.stage({ charge: 'ch_1', amount: 1 })

  await s.api.put('/v1/policy', { refund: 'deny' }, { bearer: s.admin })
  const denied = await s.approve(id, { totpCode: await s.code() })
  t.equal(denied.status, 200)
  t.match(denied.body, {
    type: 'denied',
    result: { ok: false, upstreamCalled: false, reason: 'policy_deny' },
    receipt: { kind: 'EXECUTE', decision: 'DENY' },
    revertActionId: null,
    revertMessage: null,
  })
  t.match((await s.receipts()).at(-1), {
    receiptId: denied.body.receipt.receiptId,
    kind: 'EXECUTE',
    decision: 'DENY',
    reason: 'policy_deny',
    detail: { phase: 'refused', via: 'approval', actionId: id, upstreamCalled: false },
  })
  t.ok(
    (await s.list()).some((a) => a.actionId === id),
    'the action stays pending',
  )

  await s.api.post('/v1/revoke', { all: true }, { bearer: s.tenant.sponsorToken })
  await s.api.put('/v1/policy', { refund: 'step_up' }, { bearer: s.admin })
  const killed = await s.approve(id, { totpCode: await s.code() })
  t.match(killed.body, { type: 'denied', result: { reason: 'sponsor_revoked_tenant' } }, 'the kill switch')
  await s.api.post('/v1/reinstate', { all: true }, { bearer: s.tenant.sponsorToken })
  t.equal(s.upstream.requests.length, 0)

  await s.api.put('/v1/policy', { refund: 'require_grant' }, { bearer: s.admin })
  const noGrant = await s.approve(id, {})
  t.match(noGrant.body, { type: 'denied', result: { reason: 'grant_required' } })
  await s.api.post('/v1/grants', { verb: 'refund', target: 'ch_1' }, { bearer: s.tenant.sponsorToken })
  const granted = await s.approve(id, {})
  t.match(granted.body, { type: 'executed' }, 'a live grant allows it, with no code')
  t.match(
    (await s.receipts()).find((x) => x.kind === 'ACTION_APPROVED'),
    {
      detail: { verification: 'none', recheck: { decision: 'ALLOW', grantId: /^grt_/ } },
    },
  )

  t.match(
    (await s.approve(id2, {})).body,
    { type: 'denied', result: { reason: 'grant_required' } },
    'grant used',
  )

  await s.api.put('/v1/policy', { refund: 'allow' }, { bearer: s.admin })
  const allowed = await s.approve(id2, {})
  t.match(allowed.body, { type: 'executed' }, 'allow: no code needed')
  t.equal(s.upstream.requests.length, 2)
})

t.test(
  "edits that leave the tool's target template unfilled give no target, not the staged one",
  async (t) => {
    // Found in review: the staged target stood in, so a grant for it paid for the edited write.
    const upstream = await startRecordingServer(t)
    const { api, tenant } = await startWithTenantSystems(t, 'fake', (tenantId) => {
      const file = billingSystems(tenantId, upstream.origin)
      file.systems[0]?.tools.push({
        name: 'pay_out',
        verb: 'refund',
        method: 'POST',
        pathTemplate: '/v1/payouts',
        target: 'account:{account}',
        params: {
          type: 'object',
          required: ['account', 'amount'],
          properties: { account: { type: ['string', 'object'] }, amount: { type: 'integer' } },
        },
      })
      return file
    })
    const admin = { bearer: tenant.apiKey }
    const staged = await api.post(
      '/v1/check',
      {
        verb: 'refund',
        target: 'account:acc_1',
        tool: { name: 'pay_out', params: { account: 'acc_1', amount: 10 } },
      },
      admin,
    )
    t.match(staged.body, { decision: 'STEP_UP', actionId: /^act_/ })
    await api.put('/v1/policy', { refund: 'require_grant' }, admin)
    await api.post('/v1/grants', { verb: 'refund', target: 'account:acc_1' }, { bearer: tenant.sponsorToken })
    const edited = await api.post(
      `/v1/agent/actions/${staged.body.actionId}/approve`,
      { params: { account: { id: 'acc_2' } } },
      admin,
    )
    t.match(edited.body, { type: 'denied', result: { reason: 'grant_required', upstreamCalled: false } })
    t.equal(upstream.requests.length, 0, 'nothing sent')
    const same = await api.post(`/v1/agent/actions/${staged.body.actionId}/approve`, {}, admin)
    t.match(same.body, { type: 'executed' }, 'unedited, the grant for its target pays for it')
  },
)

t.test('an approver key on the roster is refused before anything: no write, still pending', async (t) => {
  const s = await setup(t)
  const id = await s.stage()
  // The agent's key is fine (the re-check says STEP_UP); the approving admin key is on the roster.
  await s.api.post('/v1/revoke', { keyId: s.tenant.keyId }, { bearer: s.tenant.sponsorToken })
  const r = await s.approve(id, { totpCode: await s.code() })
  t.same([r.status, r.body.code, r.body.barred], [403, 'key_barred', 'sponsor_revoked_key'])
  t.equal(s.upstream.requests.length, 0)
  await s.api.post('/v1/reinstate', { keyId: s.tenant.keyId }, { bearer: s.tenant.sponsorToken })
  t.same(
    (await s.list()).map((a) => a.actionId),
    [id],
    'still pending',
  )
})

t.test('an approval refused after its code was checked leaves the code usable', async (t) => {
  const s = await setup(t)
  const id = await s.stage()
  // The kill switch: an admin may still approve, and the write is refused after the code is checked.
  await s.api.post('/v1/revoke', { all: true }, { bearer: s.tenant.sponsorToken })
  const code = await s.code()
  const refused = await s.approve(id, { totpCode: code })
  t.match(refused.body, {
    type: 'denied',
    result: { reason: 'sponsor_revoked_tenant', upstreamCalled: false },
  })
  await s.api.post('/v1/reinstate', { all: true }, { bearer: s.tenant.sponsorToken })
  const again = await s.approve(id, { totpCode: code })
  t.equal(again.body.type, 'executed', 'the same code, not burnt by the refusal')
  t.equal(s.upstream.requests.length, 1)
  const replay = await s.approve(await s.stage({ charge: 'ch_2', amount: 1 }), { totpCode: code })
  t.same([replay.status, replay.body.reason], [401, 'replayed'], 'once used for a write, it is used')
})

t.test('two approvals racing with one code: one write; the other is refused and stays pending', async (t) => {
  const s = await setup(t)
  const ids = [await s.stage(), await s.stage({ charge: 'ch_2', amount: 2 })]
  const code = await s.code()
  const answers = await Promise.all(ids.map((id) => s.approve(id, { totpCode: code })))
  t.same(answers.map((r) => r.status).sort(), [200, 401])
  const lost = answers.findIndex((r) => r.status === 401)
  t.equal(answers[lost]?.body.reason, 'replayed')
  t.equal(s.upstream.requests.length, 1, 'one upstream call')
  const pending = (await s.list()).map((a) => a.actionId)
  t.ok(pending.includes(ids[lost] as string), 'the loser is still pending')
  t.notOk(pending.includes(ids[1 - lost] as string), 'the winner is gone')
})

t.test('every refused code attempt leaves an APPROVAL_FAILED receipt, without the code', async (t) => {
  const s = await setup(t)
  const id = await s.stage()
  const right = await s.code()
  const wrong = right === '123456' ? '654321' : '123456'
  const failures = async () =>
    (await s.receipts()).filter((r) => r.kind === 'APPROVAL_FAILED').map((r) => r.detail.failure)
  t.equal((await s.approve(id, { totpCode: wrong })).status, 401)
  t.same(await failures(), ['wrong_code'])
  t.equal((await s.approve(await s.stage({ charge: 'ch_3', amount: 3 }), { totpCode: right })).status, 200)
  t.equal((await s.approve(id, { totpCode: right })).status, 401)
  t.same(await failures(), ['wrong_code', 'replayed'])
  for (let i = 0; i < 3; i++) await s.approve(id, { totpCode: wrong })
  const locked = await s.approve(id, { totpCode: await s.code(30) })
  t.equal(locked.status, 429)
  const all = (await s.receipts()).filter((r) => r.kind === 'APPROVAL_FAILED')
  t.same(
    all.map((r) => r.detail.failure),
    ['wrong_code', 'replayed', 'wrong_code', 'wrong_code', 'wrong_code', 'locked'],
  )
  t.match(all.at(-1), {
    decision: null,
    verb: 'refund',
    keyId: s.tenant.keyId,
    detail: {
      actionId: id,
      systemId: 'sys_billing',
      failure: 'locked',
      code: 'approval_locked',
      scope: 'action',
    },
  })
  const text = JSON.stringify(all)
  t.notOk(text.includes(wrong) || text.includes(right), 'no code in any receipt')
  const verified = await s.api.get('/v1/receipts/verify', { bearer: s.admin })
  t.equal(verified.body.valid, true, 'the chain still verifies')
})

t.test('brute force: five wrong codes lock the action for a minute', async (t) => {
  const s = await setup(t)
  const id = await s.stage()
  const wrong = (await s.code()) === '123456' ? '654321' : '123456'
  for (let i = 0; i < 5; i++) t.equal((await s.approve(id, { totpCode: wrong })).status, 401)
  const locked = await s.approve(id, { totpCode: await s.code() })
  t.same([locked.status, locked.body.code, locked.body.scope], [429, 'approval_locked', 'action'])
  t.equal(locked.headers['retry-after'], '60', 'even the right code waits')
  const other = await s.stage({ charge: 'ch_2', amount: 1 })
  t.equal(
    (await s.approve(other, { totpCode: await s.code() })).body.type,
    'executed',
    'other actions are not locked',
  )
  s.clock.advance(61_000)
  t.equal(
    (await s.approve(id, { totpCode: await s.code() })).body.type,
    'executed',
    'a minute later it works',
  )
  t.equal(s.upstream.requests.length, 2)
})

t.test('brute force: the tenant has its own bucket across actions', async (t) => {
  const s = await setup(t, 'fake', { settings: { approvals: { codeAttemptsPerTenant: 3 } } })
  const ids = await Promise.all([1, 2, 3, 4].map((n) => s.stage({ charge: `ch_${n}`, amount: n })))
  for (const id of ids.slice(0, 3)) t.equal((await s.approve(id, { totpCode: 'AAAAA-AAAAA' })).status, 401)
  const r = await s.approve(ids[3]!, { totpCode: await s.code() })
  t.same([r.status, r.body.code, r.body.scope], [429, 'approval_locked', 'tenant'])
  t.ok(Number(r.headers['retry-after']) > 0)
  t.equal(s.upstream.requests.length, 0)
})

t.test(
  'after 100 wrong codes the authenticator is locked, for approvals and portal sign-in alike, until re-enrolled',
  async (t) => {
    // The rate limits out of the way: what is tested is the count that outlasts their windows.
    const s = await setup(t, 'fake', {
      settings: {
        approvals: { codeAttemptsPerAction: 1000, codeAttemptsPerTenant: 10_000 },
        portal: { signInAttemptsPerIp: 10_000, signInAttemptsPerTenant: 10_000 },
      },
    })
    const signIn = async (code: string) => {
      const page = await s.cp.app.inject({ method: 'GET', url: '/portal/sign-in' })
      const pre = /wg_portal_pre=([^;]+)/.exec(String(page.headers['set-cookie']))?.[1] as string
      return s.cp.app.inject({
        method: 'POST',
        url: '/portal/sign-in',
        headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: `wg_portal_pre=${pre}` },
        payload: new URLSearchParams({ _csrf: pre, apiKey: s.tenant.apiKey, code }).toString(),
      })
    }
    // Half at the portal, half at approvals, hours apart: one count across both, past every window.
    for (let i = 0; i < 50; i++) t.equal((await signIn('000000')).statusCode, 401)
    s.clock.advance(6 * 3600_000)
    const id = await s.stage()
    for (let i = 0; i < 49; i++) t.equal((await s.approve(id, { totpCode: 'AAAAA-AAAAA' })).status, 401)
    const right = await s.approve(id, { totpCode: await s.code() })
    t.equal(right.status, 200, 'a right code is checked and used, and takes back only its own count')
    const id2 = await s.stage({ charge: 'ch_2', amount: 2 })
    t.equal((await s.approve(id2, { totpCode: '000000' })).status, 401, 'the 100th wrong code is checked')
    s.clock.advance(60_000)
    const locked = await s.approve(id2, { totpCode: await s.code() })
    t.same(
      [locked.status, locked.body.code],
      [403, 'step_up_locked'],
      'the 101st, right or not, is refused unchecked',
    )
    s.clock.advance(60_000)
    const portal = await signIn(await s.code())
    t.equal(portal.statusCode, 403, 'the portal refuses a right code too')
    t.match(portal.body, /step_up_locked/)
    const revoked = (await s.receipts()).filter(
      (r) => r.kind === 'CREDENTIAL_REVOKED' && r.detail.credential === 'totp',
    )
    t.equal(revoked.length, 1, 'the lock is on record, once')
    t.ok(
      (await s.receipts()).some((r) => r.kind === 'APPROVAL_FAILED' && r.detail.failure === 'step_up_locked'),
      'and each locked attempt',
    )
    t.match(revoked[0]?.detail, {
      reason: 'too_many_wrong_codes',
      limit: 100,
      actor: { type: 'writegate' },
    })
    const enrol = await s.api.post('/v1/sponsor/totp', {}, { bearer: s.tenant.sponsorToken })
    t.equal(enrol.status, 200)
    s.tenant.totp.secret = enrol.body.totp.secret as string
    t.equal(
      (await s.approve(id2, { totpCode: await s.code() })).status,
      200,
      're-enrolled: a right code approves',
    )
  },
)

t.test('an upstream failure is 502; the action is pending again and a retry reuses its key', async (t) => {
  const s = await setup(t)
  const id = await s.stage()
  s.upstream.respond((_q, res) => {
    res.writeHead(500, { 'content-type': 'text/plain' }).end('boom')
  })
  const r = await s.approve(id, { totpCode: await s.code() })
  t.equal(r.status, 502)
  t.match(r.body, {
    error: 'upstream error',
    code: 'upstream_error',
    type: 'upstream_error',
    message: /pending again/,
    result: { ok: false, upstreamCalled: true, status: 500, failure: 'upstream_5xx', timeout: false },
    receipt: { kind: 'ACTION_APPROVED', outcomeReceiptId: /^rcp_/ },
    revertActionId: null,
  })
  t.same(
    (await s.list()).map((a) => a.actionId),
    [id],
  )
  s.upstream.respond((_q, res) => {
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"id":"re_2"}')
  })
  const retry = await s.approve(id, { totpCode: await s.code(30) })
  t.equal(retry.body.type, 'executed')
  t.same(
    s.upstream.requests.map((x) => x.headers['idempotency-key']),
    [id, id],
  )
})

t.test('require_grant: a grant is given back when the write never left, kept when it may have', async (t) => {
  // A port that was just free: nothing listens on it until the upstream comes up below.
  const probe = createNetServer()
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve))
  const port = (probe.address() as AddressInfo).port
  await new Promise((resolve) => probe.close(resolve))
  // Reads the grant's row: on a real database.
  const s = await setup(t, 'pglite-memory', {}, `http://127.0.0.1:${port}`)
  const grantRow = async (grantId: string) =>
    (
      await s.cp.database!.sql<{ consumed_by: string | null }[]>`
        select consumed_by from grants where tenant_id = ${s.tenant.tenantId} and id = ${grantId}`
    )[0]?.consumed_by
  const grant = async (target: string) =>
    (await s.api.post('/v1/grants', { verb: 'refund', target }, { bearer: s.tenant.sponsorToken })).body
      .grantId as string
  const id = await s.stage()
  const id2 = await s.stage({ charge: 'ch_2', amount: 1 })
  await s.api.put('/v1/policy', { refund: 'require_grant' }, { bearer: s.admin })
  const grantId = await grant('ch_1')

  // The connection is refused: the write never left, so the grant goes back.
  const refused = await s.approve(id, {})
  t.equal(refused.status, 502)
  t.match(refused.body, {
    type: 'upstream_error',
    result: { upstreamCalled: false, failure: 'connect_failed' },
    receipt: { kind: 'ACTION_APPROVED' },
  })
  t.equal(await grantRow(grantId), null, 'the grant is live again in Postgres')
  // A policy change republishes the snapshot from Postgres: the grant must survive that too.
  await s.api.put('/v1/policy', { refund: 'require_grant', verify: 'allow' }, { bearer: s.admin })

  const received: string[] = []
  let status = 200
  const upstream = createServer((req, res) => {
    received.push(String(req.headers['idempotency-key']))
    req.resume().on('end', () => {
      res.writeHead(status, { 'content-type': 'application/json' }).end('{"id":"re_1"}')
    })
  })
  await new Promise<void>((resolve) => upstream.listen(port, '127.0.0.1', resolve))
  t.teardown(() => {
    upstream.closeAllConnections()
    return new Promise((resolve) => upstream.close(resolve))
  })

  const retry = await s.approve(id, {})
  t.equal(retry.status, 200)
  t.match(
    retry.body,
    { type: 'executed', result: { ok: true, status: 200 } },
    'the retry uses the same grant',
  )
  const approvals = (await s.receipts()).filter((r) => r.kind === 'ACTION_APPROVED')
  t.same(
    approvals.map((r) => r.detail.recheck.grantId),
    [grantId, grantId],
  )
  t.equal(await grantRow(grantId), retry.body.receipt.receiptId, 'consumed by the write that went out')
  t.same(received, [id])

  // Sent, and answered 5xx: the write may have happened, so the grant stays used.
  const grant2 = await grant('ch_2')
  status = 503
  const failed = await s.approve(id2, {})
  t.equal(failed.status, 502)
  t.match(failed.body, { type: 'upstream_error', result: { upstreamCalled: true, failure: 'upstream_5xx' } })
  t.equal(await grantRow(grant2), failed.body.receipt.receiptId, 'the grant stays consumed')
  status = 200
  t.match(
    (await s.approve(id2, {})).body,
    { type: 'denied', result: { reason: 'grant_required' } },
    'no second write on the same grant',
  )
  t.same(received, [id, id2])
})

t.test('undo templates and tool paths', async (t) => {
  const s = await setup(t)
  t.test('an undo that cannot be built from the answer is reported, not staged', async (t) => {
    s.upstream.respond((_q, res) => {
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"ok"}')
    })
    const r = await s.approve(await s.stage(), { totpCode: await s.code() })
    t.match(r.body, { type: 'executed', revertActionId: null, revertMessage: /result\.id is missing/ })
    t.same(await s.list(), [])
  })
  t.test('a 4xx answer is reported as sent, with no undo', async (t) => {
    s.clock.advance(30_000)
    s.upstream.respond((_q, res) => {
      res.writeHead(409, { 'content-type': 'application/json' }).end('{"error":"already refunded"}')
    })
    const r = await s.approve(await s.stage(), { totpCode: await s.code() })
    t.match(r.body, {
      type: 'executed',
      result: { ok: false, status: 409, body: { error: 'already refunded' } },
      revertActionId: null,
      revertMessage: null,
    })
  })
  t.test('path placeholders are one encoded segment; unsafe values are refused', async (t) => {
    s.clock.advance(30_000)
    s.upstream.respond((_q, res) => {
      res.writeHead(204).end()
    })
    const r = await s.approve(await s.stage({ charge: 'ch é?', note: 'late' }, 'annotate'), {
      totpCode: await s.code(),
    })
    t.match(r.body, { type: 'executed', result: { status: 204, body: '' }, revertActionId: null })
    const last = s.upstream.requests.at(-1)!
    t.same(
      [last.method, last.url, last.body],
      ['PATCH', '/v1/charges/ch%20%C3%A9%3F/notes', '{"note":"late"}'],
    )
    const count = s.upstream.requests.length
    for (const charge of ['..', 'a/b', '50%']) {
      const bad = await s.approve(await s.stage({ charge, note: 'x' }, 'annotate'), {
        totpCode: await s.code(),
      })
      t.same([bad.status, bad.body.code], [400, 'invalid_params'], charge)
    }
    t.equal(s.upstream.requests.length, count)
  })
})

for (const kind of API_BACKENDS) {
  t.test(`concurrent approvals of one action make exactly one upstream call on ${kind}`, async (t) => {
    const s = await setup(t, kind)
    const id = await s.stage()
    await s.api.put('/v1/policy', { refund: 'allow' }, { bearer: s.admin })
    s.upstream.respond(async (_q, res) => {
      await new Promise((resolve) => setTimeout(resolve, 50))
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"id":"re_1"}')
    })
    const results = await Promise.all(Array.from({ length: 10 }, () => s.approve(id, {})))
    t.equal(results.filter((r) => r.status === 200 && r.body.type === 'executed').length, 1)
    t.equal(results.filter((r) => r.status === 404).length, 9, 'the others find it gone')
    t.equal(s.upstream.requests.length, 1)
    t.equal((await s.receipts()).filter((r) => r.kind === 'ACTION_APPROVED').length, 1)
  })
}

t.test('a write the gate-proxy staged is replayed byte for byte on approval', async (t) => {
  process.env.BILLING_TOKEN = 'proxy-upstream-secret'
  const upstream = await startRecordingServer(t)
  // Tampers with the stored action: on a real database.
  const { api, cp, tenant, clock } = await startWithTenantSystems(t, 'pglite-memory', (tenantId) =>
    proxySystems(upstream.origin, tenantId),
  )
  const agent = await api.post('/v1/keys', { email: tenant.email, scope: 'agent' }, { bearer: tenant.apiKey })
  const proxy = await startEmbeddedProxy(
    t,
    cp,
    null,
    {
      WRITEGATE_PROXY_API_KEY: agent.body.apiKey,
      BILLING_TOKEN: 'proxy-upstream-secret',
    },
    {},
    { settings: { credentials: BILLING_CREDENTIALS } },
  )
  await waitReady(proxy)
  const code = (offset = 0) =>
    generate({ secret: tenant.totp.secret, epoch: Math.floor(clock.nowMs() / 1000) + offset })
  const approve = (id: string, body: Record<string, unknown>) =>
    api.post(`/v1/agent/actions/${id}/approve`, body, { bearer: tenant.apiKey })
  // Not JCS: key order, spacing and the content type's parameters must survive as sent.
  const sent = '{ "charge": "ch_1",  "amount": 500 }'
  const stageViaProxy = async () => {
    const r = await agentRequest(proxy.port, {
      method: 'POST',
      path: '/sys_billing/v1/refunds',
      headers: { 'content-type': 'application/json; charset=utf-8' },
      body: sent,
    })
    t.equal(r.status, 428)
    return r.json().actionId as string
  }
  const id = await stageViaProxy()
  t.equal(upstream.requests.length, 0)

  // What the human approves, readable: the body decoded, beside the exact base64 that is replayed.
  const shown = await api.get(`/v1/agent/actions/${id}`, { bearer: tenant.apiKey })
  t.equal(shown.status, 200)
  t.match(shown.body, {
    actionId: id,
    tool: '@http',
    request: {
      method: 'POST',
      path: '/v1/refunds',
      contentType: 'application/json; charset=utf-8',
      bodyEncoding: 'json',
      body: { charge: 'ch_1', amount: 500 },
      bodyBytes: Buffer.byteLength(sent),
    },
  })
  t.equal(Buffer.from(shown.body.params.body, 'base64').toString('utf8'), sent)
  const listed = await api.get('/v1/agent/actions', { bearer: tenant.apiKey })
  t.same(listed.body.actions[0].request, shown.body.request, 'the list shows it the same way')
  const asAgent = await api.get(`/v1/agent/actions/${id}`, { bearer: agent.body.apiKey })
  t.equal(asAgent.status, 403, 'an agent never sees its pending writes')
  const missing = await api.get('/v1/agent/actions/act_nope', { bearer: tenant.apiKey })
  t.same([missing.status, missing.body.code], [404, 'action_not_found'])

  const edited = await approve(id, { totpCode: await code(), params: { amount: 1 } })
  t.same([edited.status, edited.body.code], [400, 'invalid_params'], 'a proxied request cannot be edited')
  const tampered = await stageViaProxy()
  await cp.database!.sql`update pending_actions
    set params = jsonb_set(params, '{body}', to_jsonb(${Buffer.from('{"amount":99999}').toString('base64')}::text))
    where id = ${tampered}`
  const refused = await approve(tampered, { totpCode: await code() })
  t.same([refused.status, refused.body.code], [400, 'invalid_params'])
  t.match(refused.body.issues, [{ message: /does not match its recorded digest/ }])
  t.equal(upstream.requests.length, 0)

  const r = await approve(id, { totpCode: await code() })
  t.equal(r.status, 200)
  t.match(r.body, { type: 'executed', result: { status: 200 }, revertActionId: null, revertMessage: null })
  t.equal(upstream.requests.length, 1)
  const seen = upstream.requests[0]!
  t.same([seen.method, seen.url, seen.body], ['POST', '/v1/refunds', sent])
  t.equal(seen.headers['content-type'], 'application/json; charset=utf-8')
  t.equal(seen.headers.authorization, 'Bearer proxy-upstream-secret')
  t.equal(seen.headers['idempotency-key'], id)
  const [approved] = (
    await cp.database!.sql<{ body: string }[]>`select body from receipts
      where tenant_id = ${tenant.tenantId} and kind = 'ACTION_APPROVED'`
  ).map((x) => JSON.parse(x.body))
  t.match(approved.detail, {
    actionId: id,
    tool: '@http',
    request: { method: 'POST', path: '/v1/refunds', bodyBytes: Buffer.byteLength(sent) },
  })
  t.notOk(JSON.stringify(approved).includes('ch_1'), 'the audit log keeps the digest, not the body')
})
