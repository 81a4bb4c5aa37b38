import { Readable } from 'node:stream'
import t from 'tap'
import { verifyExport } from '../../src/cli/verify-export.js'
import { nowSeconds } from '../../src/core/clock.js'
import { parseEd25519PublicKey } from '../../src/core/ed25519.js'
import { newId } from '../../src/core/ids.js'
import { draft, type ReceiptDraft } from '../../src/core/receipt.js'
import { API_BACKENDS } from '../helpers/backends.js'
import { startControlPlane } from '../helpers/control-plane.js'

for (const kind of API_BACKENDS) {
  t.test(`receipts API: ${kind}`, async (t) => {
    const { api, cp, clock } = await startControlPlane(t, kind)
    const log = cp.auditTrail.log
    const a = await api.newTenant()
    const b = await api.newTenant()
    const agent = await api.post('/v1/keys', { email: a.email, scope: 'agent' }, { bearer: a.apiKey })
    t.equal(agent.status, 201, 'an agent key of tenant A')
    const now = nowSeconds(clock)
    const d = (tenantId: string, fields: Partial<ReceiptDraft> = {}) =>
      draft({
        receiptId: newId('receipt'),
        tenantId,
        kind: 'CHECK',
        decision: 'ALLOW',
        createdAt: now,
        ...fields,
      })

    const mine = await log.append([
      d(a.tenantId, { decision: 'ALLOW', verb: 'refund' }),
      d(a.tenantId, { decision: 'DENY' }),
      d(a.tenantId, { decision: 'STEP_UP' }),
      d(a.tenantId, { kind: 'REVOKE', decision: 'REVOKE' }),
      d(a.tenantId, { kind: 'EXECUTE', decision: 'ALLOW' }),
      d(a.tenantId, { decision: 'ALLOW', createdAt: now - 86_400 - 1 }), // outside the stats window
    ])
    const theirs = await log.append([d(b.tenantId)])

    t.test('GET /v1/receipts/{id}: own receipts only; foreign and missing are the same 404', async (t) => {
      const own = await api.get(`/v1/receipts/${mine[0]?.receiptId}`, { bearer: a.apiKey })
      t.equal(own.status, 200)
      t.same(own.body, mine[0])
      const foreign = await api.get(`/v1/receipts/${theirs[0]?.receiptId}`, { bearer: a.apiKey })
      const missing = await api.get(`/v1/receipts/${newId('receipt')}`, { bearer: a.apiKey })
      t.equal(foreign.status, 404)
      t.same(foreign.body, missing.body, 'indistinguishable')
      t.same(foreign.body, { error: 'receipt not found', code: 'receipt_not_found' })
    })

    t.test('credentials: 401 without a key, 403 for an agent key, badge tokens are not keys', async (t) => {
      const badge = await api.post('/v1/badge/tokens', {}, { bearer: a.apiKey })
      for (const path of [
        `/v1/receipts/${mine[0]?.receiptId}`,
        '/v1/receipts',
        '/v1/receipts/stats',
        '/v1/receipts/verify',
        '/v1/receipts/export',
        '/v1/receipts/stream',
      ]) {
        t.equal((await api.get(path)).status, 401, `${path} without a key`)
        t.equal(
          (await api.get(path, { bearer: badge.body.badgeToken })).status,
          401,
          `${path} with a badge token`,
        )
        const r = await api.get(path, { bearer: agent.body.apiKey })
        t.equal(r.status, 403, `${path} with an agent key`)
        t.equal(r.body.code, 'insufficient_scope')
      }
    })

    t.test('GET /v1/receipts pages in seq order', async (t) => {
      const all = await api.get('/v1/receipts?limit=1000', { bearer: a.apiKey })
      t.equal(all.status, 200)
      t.equal(all.body.tenantId, a.tenantId)
      const seqs = all.body.receipts.map((r: { seq: number }) => r.seq)
      t.same(
        seqs,
        Array.from({ length: seqs.length }, (_, i) => i + 1),
      )
      t.ok(all.body.receipts.every((r: { tenantId: string }) => r.tenantId === a.tenantId))
      const page = await api.get('/v1/receipts?after=2&limit=2', { bearer: a.apiKey })
      t.same(
        page.body.receipts.map((r: { seq: number }) => r.seq),
        [3, 4],
      )
      t.equal(page.body.nextAfter, 4)
      const end = await api.get(`/v1/receipts?after=${seqs.length}`, { bearer: a.apiKey })
      t.same(end.body, { tenantId: a.tenantId, receipts: [], nextAfter: seqs.length })
      const dflt = await api.get('/v1/receipts', { bearer: a.apiKey })
      t.equal(dflt.body.receipts.length, seqs.length, 'default limit 100 covers this log')
    })

    t.test('bad query parameters are 400 JSON, never 500', async (t) => {
      for (const q of [
        '/v1/receipts?limit=0',
        '/v1/receipts?limit=1001',
        '/v1/receipts?limit=abc',
        '/v1/receipts?after=-1',
        '/v1/receipts?after=1.5',
        '/v1/receipts/verify?from=0',
        '/v1/receipts/verify?from=5&to=4',
        '/v1/receipts/verify?to=x',
        '/v1/receipts/stream?since=-3',
        '/v1/receipts/stream?since=abc',
      ]) {
        const r = await api.get(q, { bearer: a.apiKey })
        t.equal(r.status, 400, q)
        t.equal(r.body.code, 'invalid_request', q)
      }
      const badHeader = await api.get('/v1/receipts/stream', {
        bearer: a.apiKey,
        headers: { 'last-event-id': 'nope' },
      })
      t.equal(badHeader.status, 400, 'a malformed Last-Event-ID')
    })

    t.test('GET /v1/receipts/stats counts the last 24 hours by decision', async (t) => {
      const r = await api.get('/v1/receipts/stats', { bearer: a.apiKey })
      t.equal(r.status, 200)
      t.same(r.body, {
        tenantId: a.tenantId,
        byDecision: { ALLOW: 1, DENY: 1, REVOKE: 1, STEP_UP: 1 },
        total: 4,
        cap: 5000,
        truncated: false,
        since: now - 86_400,
        windowSeconds: 86_400,
      })
      // Over the cap: the counts are a floor and say so.
      const big = await api.newTenant()
      await log.append(Array.from({ length: 5001 }, () => d(big.tenantId, { decision: 'DENY' })))
      const capped = await api.get('/v1/receipts/stats', { bearer: big.apiKey })
      t.equal(capped.body.truncated, true)
      t.equal(capped.body.total, 5000)
      t.equal(capped.body.byDecision.DENY, 5000)
    })

    t.test('GET /v1/receipts/verify recomputes the chain', async (t) => {
      await cp.auditTrail.services.checkpointer.runOnce()
      const r = await api.get('/v1/receipts/verify', { bearer: a.apiKey })
      t.equal(r.status, 200)
      t.match(r.body, { tenantId: a.tenantId, valid: true, from: 1 })
      t.equal(r.body.checked, r.body.headSeq)
      t.equal(r.body.to, r.body.headSeq)
      t.equal(r.body.checkpoint.seq, r.body.headSeq, 'anchored by a signed checkpoint at the head')
      t.notOk('reason' in r.body)
      const part = await api.get('/v1/receipts/verify?from=3&to=5', { bearer: a.apiKey })
      t.match(part.body, { valid: true, checked: 3, from: 3, to: 5 })
      const head = r.body.headSeq as number
      const next = await api.get(`/v1/receipts/verify?from=${head + 1}`, { bearer: a.apiKey })
      t.match(next.body, { valid: true, checked: 0 }, "from the head's successor: nothing new, nothing wrong")
      // Found in review: a range past the head verified as valid, so a monitor verifying from
      // where it last stopped could not tell a log cut short.
      const beyond = await api.get('/v1/receipts/verify?from=1000', { bearer: a.apiKey })
      t.match(beyond.body, {
        valid: false,
        checked: 0,
        firstInvalidSeq: head + 1,
        reason: 'truncated',
        message: `the log ends at seq ${head}, before seq 999`,
      })
      const empty = await api.newTenant()
      await cp.database!.sql`delete from receipts where tenant_id = ${empty.tenantId}`
      await cp.database!.sql`delete from audit_heads where tenant_id = ${empty.tenantId}`
      const none = await api.get('/v1/receipts/verify', { bearer: empty.apiKey })
      t.match(none.body, { valid: true, checked: 0, headSeq: 0 })
      // Found in review: a row planted past the head row (the head left alone) was never read,
      // though the list and the stream serve it.
      const planted = await api.newTenant()
      const plantedHead = (await api.get('/v1/receipts/verify', { bearer: planted.apiKey })).body
        .headSeq as number
      await cp.database!
        .sql`insert into receipts (tenant_id, seq, receipt_id, kind, decision, created_at, body, hash)
        values (${planted.tenantId}, ${plantedHead + 1}, 'rcp_planted', 'CHECK', 'ALLOW', 1, '{"garbage":true}', 'zz')`
      for (const q of ['', `?from=${plantedHead + 1}`, `?from=1&to=${plantedHead}`]) {
        const v = await api.get(`/v1/receipts/verify${q}`, { bearer: planted.apiKey })
        t.match(
          v.body,
          { valid: false, reason: 'head_mismatch', firstInvalidSeq: plantedHead + 1 },
          `verify${q}: the row past the head is found`,
        )
      }
    })

    t.test('the export verifies offline with the published key', async (t) => {
      const key = await api.get('/v1/audit/public-key')
      t.equal(key.status, 200, 'no credential needed')
      t.equal(key.body.algorithm, 'Ed25519')
      // Through inject directly: the Api helper would try to parse JSON Lines as one JSON document.
      const exportOf = (apiKey: string) =>
        cp.app.inject({
          method: 'GET',
          url: '/v1/receipts/export',
          headers: { authorization: `Bearer ${apiKey}` },
        })
      const r = await exportOf(a.apiKey)
      t.equal(r.statusCode, 200)
      t.match(r.headers['content-type'], /^application\/x-ndjson/)
      const lines = (r.body as string).trimEnd().split('\n')
      const header = JSON.parse(lines[0] as string)
      const checkpoint = JSON.parse(lines[1] as string)
      t.same(header, { format: 'writegate-audit-export', tenantId: a.tenantId, type: 'header', version: 1 })
      t.equal(checkpoint.type, 'checkpoint')
      t.equal(checkpoint.seq, lines.length - 2, 'the checkpoint signs the last exported receipt')
      t.equal(checkpoint.keyId, key.body.keyId)
      for (const pk of [key.body.publicKeyPem, key.body.publicKeyBase64]) {
        const verdict = await verifyExport(Readable.from([r.body as string]), parseEd25519PublicKey(pk))
        t.equal(verdict.valid, true, verdict.failure?.message ?? 'valid')
        t.equal(verdict.checked, lines.length - 2)
      }
      const other = await exportOf(b.apiKey)
      t.notOk((other.body as string).includes(a.tenantId), "another tenant's export holds nothing of A")
    })
  })
}
