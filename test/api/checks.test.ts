import t from 'tap'
import type { ManualClock } from '../../src/core/clock.js'
import { API_BACKENDS } from '../helpers/backends.js'
import { startControlPlane, startWithTenantSystems } from '../helpers/control-plane.js'

for (const kind of API_BACKENDS) {
  t.test(`POST /v1/check on ${kind}`, async (t) => {
    const { api, cp, clock } = await startControlPlane(t, kind)
    const checkReceipts = async (tenantId: string) =>
      (
        await cp.database!.sql<
          { body: string }[]
        >`select body from receipts where tenant_id = ${tenantId} and kind = 'CHECK' order by seq`
      ).map((r) => JSON.parse(r.body))

    t.test(
      'default modes, the response shape, and a receipt for every check (retries included)',
      async (t) => {
        const o = await api.newTenant()
        const allow = await api.post('/v1/check', { verb: 'verify', target: 'acct-1' }, { bearer: o.apiKey })
        t.equal(allow.status, 200)
        t.match(allow.body, {
          decision: 'ALLOW',
          verb: 'verify',
          requestedVerb: 'verify',
          mode: 'allow',
          provenance: 'tenant',
          reason: 'policy_allow',
          receiptId: /^rcp_/,
          seq: Number,
          policyVersion: Number,
          token: /^wgt_/,
          expiresAt: Math.floor(clock.nowMs() / 1000) + 60,
        })
        t.notOk(allow.body.leaseId, 'no lease without a request')
        t.match((await api.post('/v1/check', { verb: 'admit' }, { bearer: o.apiKey })).body, {
          decision: 'STEP_UP',
          mode: 'step_up',
          reason: 'step_up_required',
        })
        t.match((await api.post('/v1/check', { verb: 'provision' }, { bearer: o.apiKey })).body, {
          decision: 'DENY',
          mode: 'require_grant',
          reason: 'grant_required',
        })
        await api.post('/v1/verbs', { name: 'shop.order' }, { bearer: o.apiKey })
        t.match(
          (await api.post('/v1/check', { verb: 'shop.order' }, { bearer: o.apiKey })).body,
          { decision: 'DENY', mode: 'deny', reason: 'policy_deny' },
          'an unset custom verb resolves to deny',
        )
        const again = await api.post('/v1/check', { verb: 'verify', target: 'acct-1' }, { bearer: o.apiKey })
        t.not(again.body.receiptId, allow.body.receiptId, 'a retry is a new decision with its own receipt')
        t.ok(again.body.seq > allow.body.seq)
        const rows = await checkReceipts(o.tenantId)
        t.equal(rows.length, 5)
        t.match(rows[0], {
          kind: 'CHECK',
          decision: 'ALLOW',
          verb: 'verify',
          target: 'acct-1',
          keyId: o.keyId,
          principalId: o.principalId,
          principalName: 'default',
          reason: 'policy_allow',
          receiptId: allow.body.receiptId,
          seq: allow.body.seq,
        })
      },
    )

    t.test('unknown verbs and environments are 400 and write no receipt (and use no quota)', async (t) => {
      const o = await api.newTenant()
      const v = await api.post('/v1/check', { verb: 'made.up' }, { bearer: o.apiKey })
      t.same([v.status, v.body.code, v.body.verbs], [400, 'unknown_verb', ['made.up']])
      const e = await api.post('/v1/check', { verb: 'verify', environment: 'qa' }, { bearer: o.apiKey })
      t.same([e.status, e.body.code], [400, 'unknown_environment'])
      for (const body of [
        {},
        { verb: '' },
        { verb: 'verify', extra: 1 },
        { verb: 5 },
        { verb: 'verify', request: { systemId: 'sys_x' } },
      ]) {
        t.equal((await api.post('/v1/check', body, { bearer: o.apiKey })).status, 400, JSON.stringify(body))
      }
      t.equal((await checkReceipts(o.tenantId)).length, 0)
      t.equal((await api.get('/v1/me', { bearer: o.apiKey })).body.quota.used, 0)
    })

    t.test('layers: environment only when named; principal over environment', async (t) => {
      const o = await api.newTenant()
      await api.put('/v1/policies/environments/prod', { verify: 'deny' }, { bearer: o.apiKey })
      t.match((await api.post('/v1/check', { verb: 'verify' }, { bearer: o.apiKey })).body, {
        decision: 'ALLOW',
        provenance: 'tenant',
      })
      t.match(
        (await api.post('/v1/check', { verb: 'verify', environment: 'prod' }, { bearer: o.apiKey })).body,
        { decision: 'DENY', provenance: 'environment' },
      )
      await api.put(`/v1/policies/principals/${o.principalId}`, { verify: 'allow' }, { bearer: o.apiKey })
      t.match(
        (await api.post('/v1/check', { verb: 'verify', environment: 'prod' }, { bearer: o.apiKey })).body,
        { decision: 'ALLOW', provenance: 'principal' },
      )
    })

    t.test('dead keys still get an answer: DENY, on record', async (t) => {
      const o = await api.newTenant()
      const mk = async (name: string) => {
        const p = await api.post('/v1/principals', { name }, { bearer: o.apiKey })
        const k = await api.post(
          '/v1/keys',
          { email: o.email, principal_id: p.body.principalId },
          { bearer: o.apiKey },
        )
        return { principalId: p.body.principalId as string, key: k.body.apiKey as string }
      }
      const revoked = await mk('revoked')
      const disabled = await mk('disabled')
      const deleted = await mk('deleted')
      await api.post(`/v1/principals/${revoked.principalId}/revoke`, {}, { bearer: o.apiKey })
      await api.patch(`/v1/principals/${disabled.principalId}`, { disabled: true }, { bearer: o.apiKey })
      await api.delete(`/v1/principals/${deleted.principalId}`, { bearer: o.apiKey })
      for (const [who, reason, provenance] of [
        [revoked, 'key_revoked', 'revocation'],
        [disabled, 'principal_disabled', 'principal_inactive'],
        [deleted, 'key_revoked', 'revocation'],
      ] as const) {
        const r = await api.post('/v1/check', { verb: 'verify' }, { bearer: who.key })
        t.equal(r.status, 200)
        t.match(r.body, { decision: 'DENY', reason, provenance, receiptId: /^rcp_/ }, reason)
        t.equal((await api.get('/v1/me', { bearer: who.key })).status, 401)
      }
      t.equal((await checkReceipts(o.tenantId)).filter((r) => r.decision === 'DENY').length, 3)
    })

    t.test(
      'a key that checked before it died is judged by its standing now, not as first seen',
      async (t) => {
        // /v1/check keeps who a key is after its first use (no Postgres lookup per check); its
        // standing is the snapshot's to judge at every check.
        const o = await api.newTenant()
        const p = await api.post('/v1/principals', { name: 'worker' }, { bearer: o.apiKey })
        const key = (
          await api.post(
            '/v1/keys',
            { email: o.email, principal_id: p.body.principalId },
            { bearer: o.apiKey },
          )
        ).body.apiKey as string
        const check = async () => (await api.post('/v1/check', { verb: 'verify' }, { bearer: key })).body
        t.match(await check(), { decision: 'ALLOW' })
        await api.patch(`/v1/principals/${p.body.principalId}`, { disabled: true }, { bearer: o.apiKey })
        t.match(await check(), { decision: 'DENY', reason: 'principal_disabled' })
        t.equal((await api.get('/v1/me', { bearer: key })).status, 401, 'other routes look the key up afresh')
        await api.patch(`/v1/principals/${p.body.principalId}`, { disabled: false }, { bearer: o.apiKey })
        t.match(await check(), { decision: 'ALLOW' }, 'enabled again')
        await api.post(`/v1/principals/${p.body.principalId}/revoke`, {}, { bearer: o.apiKey })
        t.match(await check(), { decision: 'DENY', reason: 'key_revoked' })
        const unknown = await api.post('/v1/check', { verb: 'verify' }, { bearer: `${key.slice(0, -4)}zzzz` })
        t.equal(unknown.status, 401, 'a key that never resolved is not cached')
      },
    )

    t.test('quota: 100 checks per key per calendar month, then 402 without a receipt', async (t) => {
      const o = await api.newTenant()
      for (let i = 0; i < 100; i++) {
        const r = await api.post('/v1/check', { verb: 'verify' }, { bearer: o.apiKey })
        if (r.status !== 200) t.fail(`check ${i}: ${r.status}`)
      }
      const over = await api.post('/v1/check', { verb: 'verify' }, { bearer: o.apiKey })
      t.equal(over.status, 402)
      t.same(over.body, {
        error: 'monthly check quota exhausted',
        code: 'quota_exhausted',
        limit: 100,
        used: 100,
        resetsAt: Date.UTC(2026, 11, 1) / 1000,
      })
      t.equal((await checkReceipts(o.tenantId)).length, 100)
      t.match((await api.get('/v1/me', { bearer: o.apiKey })).body.quota, {
        limit: 100,
        used: 100,
        remaining: 0,
      })
      const second = await api.post('/v1/keys', { email: o.email }, { bearer: o.apiKey })
      t.equal(
        (await api.post('/v1/check', { verb: 'verify' }, { bearer: second.body.apiKey })).status,
        200,
        'per key',
      )
      const revoke = await api.post('/v1/revoke', { keyId: o.keyId }, { bearer: o.sponsorToken })
      t.equal(revoke.status, 200, 'the kill switch is never quota-gated')
      ;(clock as ManualClock).set(Date.UTC(2026, 11, 1, 0, 0, 1))
      t.equal(
        (await api.post('/v1/check', { verb: 'verify' }, { bearer: o.apiKey })).body.reason,
        'sponsor_revoked_key',
        'a new month resets the quota',
      )
      ;(clock as ManualClock).set(Date.UTC(2026, 10, 21, 12, 0, 0))
    })

    t.test(
      'quota is exact under concurrency: 150 parallel checks → 100 decisions and 50 × 402 (ten times)',
      async (t) => {
        const o = await api.newTenant()
        for (let round = 0; round < 10; round++) {
          const k = await api.post('/v1/keys', { email: o.email }, { bearer: o.apiKey })
          const results = await Promise.all(
            Array.from({ length: 150 }, () =>
              api.post('/v1/check', { verb: 'verify' }, { bearer: k.body.apiKey }),
            ),
          )
          const ok = results.filter((r) => r.status === 200).length
          const refused = results.filter((r) => r.status === 402).length
          t.same([ok, refused], [100, 50], `round ${round}`)
          const rows = await cp.database!.sql<
            { n: number }[]
          >`select count(*)::int as n from receipts where kind = 'CHECK' and key_id = ${k.body.keyId}`
          t.equal(rows[0]?.n, 100, 'exactly 100 receipts')
        }
      },
    )

    t.test(
      'grants: single use, scoped, consumed by exactly one of 20 parallel checks (ten times)',
      async (t) => {
        const o = await api.newTenant()
        const g = await api.post(
          '/v1/grants',
          { verb: 'provision', target: 'vm-1', reason: 'change #42' },
          { bearer: o.sponsorToken },
        )
        t.equal(g.status, 201)
        t.match(g.body, {
          grantId: /^grt_/,
          verb: 'provision',
          target: 'vm-1',
          principalId: null,
          environment: null,
          expiresAt: Math.floor(clock.nowMs() / 1000) + 900,
        })
        t.match(
          (await api.post('/v1/check', { verb: 'provision', target: 'vm-2' }, { bearer: o.apiKey })).body,
          { decision: 'DENY', reason: 'grant_required' },
          'another target does not match',
        )
        const used = await api.post('/v1/check', { verb: 'provision', target: 'vm-1' }, { bearer: o.apiKey })
        t.match(used.body, {
          decision: 'ALLOW',
          provenance: 'grant',
          reason: 'grant_consumed',
          grantId: g.body.grantId,
          mode: 'require_grant',
        })
        t.match(
          (await api.post('/v1/check', { verb: 'provision', target: 'vm-1' }, { bearer: o.apiKey })).body,
          { decision: 'DENY', reason: 'grant_required' },
          'single use',
        )

        for (let round = 0; round < 10; round++) {
          const grant = await api.post('/v1/grants', { verb: 'provision' }, { bearer: o.sponsorToken })
          const results = await Promise.all(
            Array.from({ length: 20 }, () =>
              api.post(
                '/v1/check',
                { verb: 'provision', target: `r${round}` },
                { bearer: o.apiKey, headers: {} },
              ),
            ),
          )
          const allowed = results.filter((r) => r.body.decision === 'ALLOW')
          t.equal(allowed.length, 1, `round ${round}: exactly one ALLOW`)
          t.equal(allowed[0]?.body.grantId, grant.body.grantId)
          t.equal(results.filter((r) => r.body.decision === 'DENY').length, 19)
          // Keep the quota from running out across rounds.
          const fresh = await api.post('/v1/keys', { email: o.email }, { bearer: o.apiKey })
          o.apiKey = fresh.body.apiKey
        }
      },
    )

    t.test('grant scoping: principal and environment, presented first, expiry', async (t) => {
      const o = await api.newTenant()
      const p = await api.post('/v1/principals', { name: 'ops' }, { bearer: o.apiKey })
      const k = await api.post(
        '/v1/keys',
        { email: o.email, principal_id: p.body.principalId },
        { bearer: o.apiKey },
      )
      const forOps = await api.post(
        '/v1/grants',
        { verb: 'provision', principalId: p.body.principalId, environment: 'prod', ttlSeconds: 60 },
        { bearer: o.sponsorToken },
      )
      t.match(
        (await api.post('/v1/check', { verb: 'provision', environment: 'prod' }, { bearer: o.apiKey })).body,
        { decision: 'DENY' },
        'another principal',
      )
      t.match(
        (await api.post('/v1/check', { verb: 'provision', environment: 'dev' }, { bearer: k.body.apiKey }))
          .body,
        { decision: 'DENY' },
        'another environment',
      )
      ;(clock as ManualClock).advance(61_000)
      t.match(
        (await api.post('/v1/check', { verb: 'provision', environment: 'prod' }, { bearer: k.body.apiKey }))
          .body,
        { decision: 'DENY' },
        'expired',
      )
      ;(clock as ManualClock).advance(-61_000)
      const a = await api.post('/v1/grants', { verb: 'provision' }, { bearer: o.sponsorToken })
      const b = await api.post('/v1/grants', { verb: 'provision' }, { bearer: o.sponsorToken })
      t.equal(
        (await api.post('/v1/check', { verb: 'provision', grantId: b.body.grantId }, { bearer: o.apiKey }))
          .body.grantId,
        b.body.grantId,
        'a presented grant is used first',
      )
      t.equal(
        (await api.post('/v1/check', { verb: 'provision', grantId: b.body.grantId }, { bearer: o.apiKey }))
          .body.grantId,
        a.body.grantId,
        'then any live match',
      )
      t.equal(forOps.status, 201)
      for (const body of [
        { verb: 'nope.nope' },
        { verb: 'provision', ttlSeconds: 86401 },
        { verb: 'provision', ttlSeconds: 0 },
        { verb: 'provision', environment: 'qa' },
        { verb: 'provision', principalId: 'prn_nope' },
        { verb: 'demo_write' },
      ]) {
        const r = await api.post('/v1/grants', body, { bearer: o.sponsorToken })
        t.ok(r.status === 400 || r.status === 404, `${JSON.stringify(body)} → ${r.status} ${r.body.code}`)
      }
      t.equal(
        (await api.post('/v1/grants', { verb: 'provision' }, { bearer: o.apiKey })).status,
        401,
        'sponsor only',
      )
      const rows = await cp.database!.sql<
        { n: number }[]
      >`select count(*)::int as n from receipts where tenant_id = ${o.tenantId} and kind = 'GRANT'`
      t.equal(rows[0]?.n, 3, 'a GRANT receipt per mint')
    })

    t.test('the kill switch: revoke and reinstate, decided under the new state at once', async (t) => {
      const o = await api.newTenant()
      const p = await api.post('/v1/principals', { name: 'fleet' }, { bearer: o.apiKey })
      const k = await api.post(
        '/v1/keys',
        { email: o.email, principal_id: p.body.principalId },
        { bearer: o.apiKey },
      )
      const cases = [
        [
          { principalId: p.body.principalId },
          'sponsor_revoked_principal',
          { principalId: p.body.principalId },
        ],
        [{ keyId: k.body.keyId }, 'sponsor_revoked_key', { keyId: k.body.keyId }],
        [{ all: true }, 'sponsor_revoked_tenant', { all: true }],
      ] as const
      for (const [body, reason, target] of cases) {
        const r = await api.post('/v1/revoke', { ...body, reason: 'incident 7' }, { bearer: o.sponsorToken })
        t.equal(r.status, 200)
        t.same(r.body.revoked, target)
        t.match(r.body.receiptId, /^rcp_/)
        t.match((await api.post('/v1/check', { verb: 'verify' }, { bearer: k.body.apiKey })).body, {
          decision: 'DENY',
          reason,
          provenance: 'revocation',
        })
        const listed = await api.get('/v1/revoked', { bearer: o.sponsorToken })
        t.match(listed.body.revoked, [{ ...target, reason: 'incident 7', revokedAt: Number }])
        const back = await api.post('/v1/reinstate', body, { bearer: o.sponsorToken })
        t.equal(back.status, 200)
        t.same(back.body.reinstated, target)
        t.match((await api.post('/v1/check', { verb: 'verify' }, { bearer: k.body.apiKey })).body, {
          decision: 'ALLOW',
        })
        const again = await api.post('/v1/reinstate', body, { bearer: o.sponsorToken })
        t.same([again.status, again.body.code], [404, 'not_revoked'])
      }
      const kinds = (
        await cp.database!.sql<
          { kind: string }[]
        >`select kind from receipts where tenant_id = ${o.tenantId} and kind in ('REVOKE', 'REINSTATE') order by seq`
      ).map((r) => r.kind)
      t.same(kinds, ['REVOKE', 'REINSTATE', 'REVOKE', 'REINSTATE', 'REVOKE', 'REINSTATE'])
      for (const body of [
        {},
        { principalId: p.body.principalId, keyId: k.body.keyId },
        { all: false },
        { principalId: 'prn_nope' },
        { keyId: 'key_nope' },
      ]) {
        const r = await api.post('/v1/revoke', body, { bearer: o.sponsorToken })
        t.ok([400, 404].includes(r.status), `${JSON.stringify(body)} → ${r.status}`)
      }
      const other = await api.newTenant()
      t.equal(
        (await api.post('/v1/revoke', { principalId: other.principalId }, { bearer: o.sponsorToken })).status,
        404,
        "another tenant's principal",
      )
      for (const [m, u] of [
        ['POST', '/v1/revoke'],
        ['POST', '/v1/reinstate'],
        ['GET', '/v1/revoked'],
      ]) {
        const r = await api.call(m as string, u as string, m === 'POST' ? { all: true } : undefined, {
          bearer: o.apiKey,
        })
        t.same([r.status, r.body.error], [401, 'sponsor token required'], `${m} ${u}`)
      }
    })

    t.test('a check right after a policy PUT or a revoke is decided under the new state', async (t) => {
      const o = await api.newTenant()
      for (let i = 0; i < 15; i++) {
        await api.put('/v1/policy', { verify: 'allow' }, { bearer: o.apiKey })
        t.equal(
          (await api.post('/v1/check', { verb: 'verify' }, { bearer: o.apiKey })).body.decision,
          'ALLOW',
        )
        await api.put('/v1/policy', { verify: 'deny' }, { bearer: o.apiKey })
        t.equal((await api.post('/v1/check', { verb: 'verify' }, { bearer: o.apiKey })).body.decision, 'DENY')
      }
      const before = (await api.post('/v1/check', { verb: 'verify' }, { bearer: o.apiKey })).body
        .policyVersion
      await api.post('/v1/revoke', { all: true }, { bearer: o.sponsorToken })
      const after = await api.post('/v1/check', { verb: 'verify' }, { bearer: o.apiKey })
      t.match(after.body, { decision: 'DENY', reason: 'sponsor_revoked_tenant' })
      t.ok(after.body.policyVersion > before, 'the decision records the newer version')
    })
  })
}

t.test('tokens: every verify reason', async (t) => {
  const { api, clock } = await startControlPlane(t, 'fake')
  const o = await api.newTenant()
  const issue = async (key = o.apiKey) =>
    (await api.post('/v1/check', { verb: 'verify', target: 't-1' }, { bearer: key })).body.token as string
  const token = await issue()
  t.same((await api.post('/v1/tokens/verify', { token }, { bearer: o.apiKey })).body, {
    valid: true,
    tenantId: o.tenantId,
    principalId: o.principalId,
    keyId: o.keyId,
    verb: 'verify',
    target: 't-1',
    expiresAt: Math.floor(clock.nowMs() / 1000) + 60,
  })
  const reason = async (tok: string, key = o.apiKey) =>
    (await api.post('/v1/tokens/verify', { token: tok }, { bearer: key })).body
  t.same(await reason('nonsense'), { valid: false, reason: 'malformed' })
  t.same(await reason('wgt_e30.e30'), { valid: false, reason: 'malformed' })
  t.same(await reason(`wgt_${'A'.repeat(10_000)}`), { valid: false, reason: 'malformed' }, 'however long')
  t.same(await reason(''), { valid: false, reason: 'malformed' })
  const [payload, sig] = token.slice(4).split('.') as [string, string]
  const forged = Buffer.from(
    JSON.stringify({ ...JSON.parse(Buffer.from(payload, 'base64url').toString()), verb: 'refund' }),
  ).toString('base64url')
  t.same(await reason(`wgt_${forged}.${sig}`), { valid: false, reason: 'bad_signature' })
  const other = await api.newTenant()
  t.same(await reason(token, other.apiKey), { valid: false, reason: 'wrong_tenant' })
  ;(clock as ManualClock).advance(61_000)
  t.same(await reason(token), { valid: false, reason: 'expired' })
  ;(clock as ManualClock).advance(-61_000)
  const second = await api.post('/v1/keys', { email: o.email }, { bearer: o.apiKey })
  // Each step a second apart: credentials are issued in whole seconds.
  const tick = () => (clock as ManualClock).advance(1000)
  const t2 = await issue(second.body.apiKey)
  tick()
  await api.post('/v1/revoke', { keyId: second.body.keyId }, { bearer: o.sponsorToken })
  t.same(await reason(t2), { valid: false, reason: 'revoked' }, 'revoked after issue')
  tick()
  await api.post('/v1/reinstate', { keyId: second.body.keyId }, { bearer: o.sponsorToken })
  // Outstanding when its key was revoked, it stays revoked (contract §3); the key is back.
  t.same(await reason(t2), { valid: false, reason: 'revoked' }, 'still revoked after the reinstate')
  t.same((await reason(await issue(second.body.apiKey))).valid, true, 'a token issued since is valid')
  // The same for the whole tenant's kill switch, and a principal disabled and enabled again.
  tick()
  const t3 = await issue(second.body.apiKey)
  tick()
  await api.post('/v1/revoke', { all: true }, { bearer: o.sponsorToken })
  tick()
  await api.post('/v1/reinstate', { all: true }, { bearer: o.sponsorToken })
  t.same(await reason(t3), { valid: false, reason: 'revoked' }, 'after the tenant kill switch')
  tick()
  const bot = await api.post('/v1/principals', { name: 'bot-for-tokens' }, { bearer: o.apiKey })
  const botKey = await api.post(
    '/v1/keys',
    { email: o.email, scope: 'agent', principal_id: bot.body.principalId },
    { bearer: o.apiKey },
  )
  const t4 = await issue(botKey.body.apiKey)
  t.same((await reason(t4)).valid, true)
  for (const disabled of [true, false]) {
    tick()
    t.equal(
      (await api.patch(`/v1/principals/${bot.body.principalId}`, { disabled }, { bearer: o.apiKey })).status,
      200,
    )
  }
  t.same(await reason(t4), { valid: false, reason: 'revoked' }, 'after its principal was disabled')
  t.same((await reason(await issue(botKey.body.apiKey))).valid, true, 'its key works again')
  // Issued in the second of the revocation, lifted a second later: outstanding, so revoked.
  tick()
  const t6 = await issue(second.body.apiKey)
  await api.post('/v1/revoke', { keyId: second.body.keyId }, { bearer: o.sponsorToken })
  tick()
  await api.post('/v1/reinstate', { keyId: second.body.keyId }, { bearer: o.sponsorToken })
  t.same(await reason(t6), { valid: false, reason: 'revoked' }, 'issued in the second of the revocation')
  // Revoked and reinstated in one second: a token of that second cannot be told from one issued
  // just after the lift, and is let be (the key could issue none in between).
  tick()
  const t5 = await issue(second.body.apiKey)
  await api.post('/v1/revoke', { keyId: second.body.keyId }, { bearer: o.sponsorToken })
  await api.post('/v1/reinstate', { keyId: second.body.keyId }, { bearer: o.sponsorToken })
  t.same((await reason(t5)).valid, true, 'a revocation lifted in its own second')
  t.equal(
    (await api.post('/v1/tokens/verify', { token }, { bearer: o.sponsorToken })).status,
    401,
    'only a bad API key gives 401',
  )
})

t.test('checks with a request get a lease; STEP_UP with a tool stages an action', async (t) => {
  // Reads the lease row: on a real database.
  const { api, cp, tenant } = await startWithTenantSystems(t, 'pglite-memory', (tenantId) => ({
    passthrough: [],
    systems: [
      {
        systemId: 'sys_billing',
        kind: 'http',
        tenantId,
        upstream: 'http://127.0.0.1:9',
        reads: 'pass',
        routes: [
          { method: 'POST', path: '/v1/refunds', verb: 'verify' },
          { method: 'PUT', path: '/v1/blobs', verb: 'verify' },
          { method: 'POST', path: '/v1/payouts/{payout}', verb: 'refund', target: 'payout:{payout}' },
        ],
        tools: [
          {
            name: 'issue_refund',
            verb: 'refund',
            method: 'POST',
            pathTemplate: '/v1/refunds',
            params: {
              type: 'object',
              required: ['charge'],
              additionalProperties: false,
              properties: { charge: { type: 'string' }, amount: { type: 'integer' } },
            },
          },
          {
            name: 'tag_charge',
            verb: 'refund',
            method: 'POST',
            pathTemplate: '/v1/tags',
            target: 'charge:{params.charge}',
            params: { type: 'object', required: ['charge'], properties: { charge: { type: 'string' } } },
          },
        ],
      },
    ],
  }))
  const key = tenant.apiKey
  const leased = await api.post(
    '/v1/check',
    {
      verb: 'verify',
      request: { systemId: 'sys_billing', method: 'POST', path: '/v1/refunds', body: { charge: 'ch_1' } },
    },
    { bearer: key },
  )
  t.match(leased.body, { decision: 'ALLOW', leaseId: /^lse_/, token: /^wgt_/ })
  const lease = await cp.database!
    .sql`select system_id, binding, used_at from leases where id = ${leased.body.leaseId}`
  t.match(lease[0], { system_id: 'sys_billing', used_at: null })
  t.equal(
    (
      await api.post(
        '/v1/check',
        { verb: 'verify', request: { systemId: 'sys_other', method: 'POST', path: '/v1/x' } },
        { bearer: key },
      )
    ).body.code,
    'unknown_system',
  )
  t.equal(
    (
      await api.post(
        '/v1/check',
        { verb: 'verify', request: { systemId: 'sys_billing', method: 'POST', path: '/x' } },
        { bearer: key },
      )
    ).status,
    400,
  )

  // The agent never picks the verb a write is gated under.
  const spoof = await api.post(
    '/v1/check',
    { verb: 'verify', request: { systemId: 'sys_billing', method: 'POST', path: '/v1/payouts/p1' } },
    { bearer: key },
  )
  t.same(
    [spoof.status, spoof.body.code, spoof.body.expected],
    [400, 'verb_mismatch', 'refund'],
    'a refund write cannot be leased as verify',
  )
  const honest = await api.post(
    '/v1/check',
    { verb: 'refund', request: { systemId: 'sys_billing', method: 'POST', path: '/v1/payouts/p1' } },
    { bearer: key },
  )
  t.match(honest.body, { decision: 'STEP_UP', verb: 'refund' })
  t.notOk(honest.body.leaseId, 'no lease without an ALLOW')
  const honestReceipt = await cp.database!.sql<
    { body: string }[]
  >`select body from receipts where receipt_id = ${honest.body.receiptId}`
  t.equal(
    JSON.parse(honestReceipt[0]!.body).target,
    'payout:p1',
    "the target comes from the route's template",
  )
  const wrongTarget = await api.post(
    '/v1/check',
    {
      verb: 'refund',
      target: 'elsewhere',
      request: { systemId: 'sys_billing', method: 'POST', path: '/v1/payouts/p1' },
    },
    { bearer: key },
  )
  t.same([wrongTarget.status, wrongTarget.body.code], [400, 'invalid_request'])
  const unmapped = await api.post(
    '/v1/check',
    { verb: 'verify', request: { systemId: 'sys_billing', method: 'DELETE', path: '/v1/refunds' } },
    { bearer: key },
  )
  t.same([unmapped.status, unmapped.body.code], [400, 'unmapped_request'])
  const toolSpoof = await api.post(
    '/v1/check',
    { verb: 'verify', tool: { name: 'issue_refund', params: { charge: 'ch_1' } } },
    { bearer: key },
  )
  t.same(
    [toolSpoof.status, toolSpoof.body.code, toolSpoof.body.expected],
    [400, 'verb_mismatch', 'refund'],
    'a tool is checked under its own verb',
  )
  // A tool's target reads its params as approval's re-check does: `{params.charge}` too.
  const tagged = await api.post(
    '/v1/check',
    { verb: 'refund', target: 'charge:ch_9', tool: { name: 'tag_charge', params: { charge: 'ch_9' } } },
    { bearer: key },
  )
  t.equal(tagged.status, 200, 'the target filled from {params.charge} is the one sent')
  const tagReceipt = await cp.database!.sql<{ body: string }[]>`
    select body from receipts where receipt_id = ${tagged.body.receiptId}`
  t.equal(JSON.parse(tagReceipt[0]!.body).target, 'charge:ch_9')

  const lower = await api.post(
    '/v1/check',
    { verb: 'verify', request: { systemId: 'sys_billing', method: 'post', path: '/v1/refunds' } },
    { bearer: key },
  )
  t.same(
    [lower.status, lower.body.issues?.[0]?.path],
    [400, 'request.method'],
    'no lease for a method execute would never send',
  )
  const big = (n: number) => ({ pad: 'x'.repeat(n - '{"pad":""}'.length) })
  const atLimit = await api.post(
    '/v1/check',
    {
      verb: 'verify',
      request: { systemId: 'sys_billing', method: 'PUT', path: '/v1/blobs', body: big(1024 * 1024) },
    },
    { bearer: key },
  )
  t.match(
    atLimit.body,
    { decision: 'ALLOW', leaseId: /^lse_/ },
    'a 1 MiB body (as JCS) can be leased, as execute accepts it',
  )
  const over = await api.post(
    '/v1/check',
    {
      verb: 'verify',
      request: { systemId: 'sys_billing', method: 'PUT', path: '/v1/blobs', body: big(1024 * 1024 + 1) },
    },
    { bearer: key },
  )
  t.same([over.status, over.body.code], [413, 'payload_too_large'])
  const staged = await api.post(
    '/v1/check',
    { verb: 'refund', target: 'ch_1', tool: { name: 'issue_refund', params: { charge: 'ch_1', amount: 5 } } },
    { bearer: key },
  )
  t.match(staged.body, { decision: 'STEP_UP', actionId: /^act_/ })
  const rows = await cp.database!.sql<
    { kind: string; body: string }[]
  >`select kind, body from receipts where tenant_id = ${tenant.tenantId} order by seq desc limit 2`
  t.same(rows.map((r) => r.kind).reverse(), ['CHECK', 'ACTION_STAGED'])
  t.match(JSON.parse(rows[0]!.body).detail, {
    actionId: staged.body.actionId,
    tool: 'issue_refund',
    params: { charge: 'ch_1', amount: 5 },
    checkReceiptId: staged.body.receiptId,
  })
  // Found in review: with both, the tool's target was taken, and the lease bound to the request:
  // a grant for the tool's target paid for the request's write to another.
  const receiptsBefore = (await api.get('/v1/receipts?limit=1000', { bearer: key })).body.receipts.length
  const mixed = await api.post(
    '/v1/check',
    {
      verb: 'refund',
      request: { systemId: 'sys_billing', method: 'POST', path: '/v1/payouts/po_big', body: {} },
      tool: { name: 'tag_charge', params: { charge: 'ch_cheap' } },
    },
    { bearer: key },
  )
  t.same([mixed.status, mixed.body.code], [400, 'invalid_request'])
  t.match(mixed.body.error, /route of sys_billing reads payout:po_big, tool tag_charge reads charge:ch_cheap/)
  t.equal(
    (await api.get('/v1/receipts?limit=1000', { bearer: key })).body.receipts.length,
    receiptsBefore,
    'no decision, no receipt',
  )
  const bad = await api.post(
    '/v1/check',
    { verb: 'refund', tool: { name: 'issue_refund', params: { charge: 'ch_1', evil: true } } },
    { bearer: key },
  )
  t.same([bad.status, bad.body.code], [400, 'invalid_params'])
  t.match(bad.body.issues, [{ message: 'unknown key evil' }])
  t.equal(
    (await api.post('/v1/check', { verb: 'refund', tool: { name: 'nope', params: {} } }, { bearer: key }))
      .body.code,
    'unknown_tool',
  )
})

t.test(
  'checks lease no call to an MCP or GraphQL endpoint and no _method override, as on gate-proxy (found in review)',
  async (t) => {
    const { api, tenant } = await startWithTenantSystems(t, 'pglite-memory', (tenantId) => ({
      passthrough: [],
      systems: [
        {
          systemId: 'sys_mcp',
          kind: 'mcp',
          tenantId,
          upstream: 'http://127.0.0.1:9',
          reads: 'pass',
          // A catch-all route that also matches the endpoint: the proxy decides the endpoint's
          // calls by their tools' verbs first, whatever it says.
          routes: [{ method: 'POST', path: '/v1/*', verb: 'verify' }],
          tools: [],
          mcp: {
            endpoint: '/v1/mcp',
            tools: [{ name: 'delete_repo', verb: 'refund' }],
            filterToolsList: false,
          },
        },
        {
          systemId: 'sys_gql',
          kind: 'graphql',
          tenantId,
          upstream: 'http://127.0.0.1:9',
          reads: 'pass',
          routes: [{ method: 'POST', path: '/v1/*', verb: 'verify' }],
          tools: [],
          graphql: { endpoint: '/v1/graphql', mutations: [{ field: 'deleteRepo', verb: 'refund' }] },
        },
      ],
    }))
    await api.put('/v1/policy', { verify: 'allow', refund: 'step_up' }, { bearer: tenant.apiKey })
    const call = {
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/call',
      params: { name: 'delete_repo', arguments: { repo: 'acme/prod' } },
    }
    for (const [systemId, path, body] of [
      ['sys_mcp', '/v1/mcp', call],
      ['sys_mcp', '/v1/MCP/', call],
      ['sys_gql', '/v1/graphql', { query: 'mutation { deleteRepo(id: "acme/prod") { id } }' }],
    ] as const) {
      const res = await api.post(
        '/v1/check',
        { verb: 'verify', request: { systemId, method: 'POST', path, body } },
        { bearer: tenant.apiKey },
      )
      t.same(
        [res.status, res.body.code, res.body.leaseId],
        [400, 'calls_endpoint', undefined],
        `${systemId} ${path}: no lease for the endpoint's calls`,
      )
    }
    // Beside the endpoint, the route still maps the request.
    const beside = await api.post(
      '/v1/check',
      { verb: 'verify', request: { systemId: 'sys_mcp', method: 'POST', path: '/v1/notes', body: {} } },
      { bearer: tenant.apiKey },
    )
    t.match(beside.body, { decision: 'ALLOW', leaseId: /^lse_/ })

    for (const path of [
      '/v1/repos/prod?_method=DELETE',
      '/v1/repos/prod?.method=DELETE',
      '/v1/x?a=1&%5FMETHOD=put',
    ]) {
      const checked = await api.post(
        '/v1/check',
        { verb: 'verify', request: { systemId: 'sys_mcp', method: 'POST', path } },
        { bearer: tenant.apiKey },
      )
      t.same([checked.status, checked.body.code], [400, 'method_override'], `check ${path}`)
      const executed = await api.post(
        '/v1/execute',
        { systemId: 'sys_mcp', method: 'POST', path, token: 'wgt_x' },
        { bearer: tenant.apiKey },
      )
      t.same([executed.status, executed.body.code], [400, 'method_override'], `execute ${path}`)
    }
    // In a JSON body too: Laravel reads a JSON request's body as its parameters (found in review).
    for (const body of [{ _method: 'DELETE' }, { ' .METHOD': 'delete', charge: 'ch_1' }]) {
      const checked = await api.post(
        '/v1/check',
        { verb: 'verify', request: { systemId: 'sys_mcp', method: 'POST', path: '/v1/repos/prod', body } },
        { bearer: tenant.apiKey },
      )
      t.same([checked.status, checked.body.code], [400, 'method_override'], `check ${JSON.stringify(body)}`)
      const executed = await api.post(
        '/v1/execute',
        { systemId: 'sys_mcp', method: 'POST', path: '/v1/repos/prod', body, token: 'wgt_x' },
        { bearer: tenant.apiKey },
      )
      t.same(
        [executed.status, executed.body.code],
        [400, 'method_override'],
        `execute ${JSON.stringify(body)}`,
      )
    }
    const nested = await api.post(
      '/v1/check',
      {
        verb: 'verify',
        request: {
          systemId: 'sys_mcp',
          method: 'POST',
          path: '/v1/repos/prod',
          body: { a: { _method: 'x' } },
        },
      },
      { bearer: tenant.apiKey },
    )
    t.equal(nested.status, 200, 'a _method below the top level is data')
  },
)

t.test('sandbox: keyless 90-second demo grants, demo_write on demo- only, limited per IP', async (t) => {
  const { api } = await startControlPlane(t, 'fake', {
    settings: { sandbox: { perIpPerMinute: 3 } },
  })
  let n = 100
  const r = await api.post('/v1/sandbox', { verb: 'demo_write', target: 'demo-1' })
  t.equal(r.status, 201)
  t.match(r.body, {
    grantId: /^grt_/,
    verb: 'demo_write',
    target: 'demo-1',
    ttlSeconds: 90,
    expiresAt: Number,
  })
  for (const body of [
    { verb: 'refund', target: 'demo-1' },
    { verb: 'demo_write', target: 'prod-1' },
    { verb: 'demo_write' },
    { verb: 'demo_write', target: 'demo-1', x: 1 },
    undefined,
  ]) {
    // Each from its own address: every attempt counts against the per-IP limit.
    n += 1
    const r = await api.post('/v1/sandbox', body, { remoteAddress: `198.51.100.${n}` })
    t.equal(r.status, 400, JSON.stringify(body))
  }
  t.equal((await api.post('/v1/sandbox', { verb: 'demo_write', target: 'demo-2' })).status, 201)
  t.equal((await api.post('/v1/sandbox', { verb: 'demo_write', target: 'demo-3' })).status, 201)
  const limited = await api.post('/v1/sandbox', { verb: 'demo_write', target: 'demo-4' })
  t.same([limited.status, limited.body.code], [429, 'rate_limited'])
  t.equal(
    (
      await api.post(
        '/v1/sandbox',
        { verb: 'demo_write', target: 'demo-4' },
        { remoteAddress: '198.51.100.9' },
      )
    ).status,
    201,
  )
})
