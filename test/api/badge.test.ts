import t from 'tap'
import { BADGE_GREEN, BADGE_GREY } from '../../src/badge/badge-svg.js'
import { BADGE_COUNT_TTL_SECONDS } from '../../src/control/badge.js'
import type { ManualClock } from '../../src/core/clock.js'
import { nowSeconds } from '../../src/core/clock.js'
import { newId } from '../../src/core/ids.js'
import { draft } from '../../src/core/receipt.js'
import { ed25519 } from '../helpers/audit-logs.js'
import { API_BACKENDS, openTestDatabase } from '../helpers/backends.js'
import { startControlPlane } from '../helpers/control-plane.js'
import { openTestRedis } from '../helpers/redis.js'

for (const kind of API_BACKENDS) {
  t.test(`badge: ${kind}`, async (t) => {
    const tcp = await startControlPlane(t, kind)
    const { api, cp } = tcp
    const clock = tcp.clock as ManualClock
    const a = await api.newTenant(undefined, { tenantName: 'Acme Secret Corp' })
    const b = await api.newTenant()
    const svg = (token: string) => api.get(`/v1/badge/${token}.svg`)

    t.test('creating a token: shown once, label private, only admin keys', async (t) => {
      const r = await api.post('/v1/badge/tokens', { label: 'team docs' }, { bearer: a.apiKey })
      t.equal(r.status, 201)
      t.match(r.body.badgeToken, /^svc_badge_[0-9A-Za-z]{32,}$/)
      t.equal(r.body.badgeUrl, `http://localhost:80/v1/badge/${r.body.badgeToken}.svg`)
      t.equal(r.body.label, 'team docs')
      t.ok(r.body.markdown.includes(r.body.badgeUrl))
      t.type(r.body.note, 'string')
      const rows = await cp.database!.sql`select * from badge_tokens where tenant_id = ${a.tenantId}`
      t.equal(rows.length, 1)
      t.notOk(
        JSON.stringify(rows).includes(r.body.badgeToken.slice('svc_badge_'.length)),
        'only a hash is stored',
      )
      t.equal((await api.post('/v1/badge/tokens', undefined, { bearer: a.apiKey })).body.label, '', 'no body')
      t.equal((await api.post('/v1/badge/tokens', {})).status, 401)
      t.equal((await api.post('/v1/badge/tokens', {}, { bearer: `svc_${'x'.repeat(40)}` })).status, 401)
      const agent = await api.post('/v1/keys', { email: a.email, scope: 'agent' }, { bearer: a.apiKey })
      t.equal((await api.post('/v1/badge/tokens', {}, { bearer: agent.body.apiKey })).status, 403)
      for (const label of ['x'.repeat(41), '<script>alert(1)</script>', 'a"b', 'é']) {
        const bad = await api.post('/v1/badge/tokens', { label }, { bearer: a.apiKey })
        t.equal(bad.status, 400, label)
        t.equal(bad.body.code, 'invalid_request')
      }
      t.equal(
        (await api.post('/v1/badge/tokens', { label: 'x', extra: 1 }, { bearer: a.apiKey })).status,
        400,
      )
    })

    t.test('the SVG shows only the 30-day gated-write count: grey at 0, green from 1', async (t) => {
      const label = 'Hostile Label_XYZ.9'
      const token = (await api.post('/v1/badge/tokens', { label }, { bearer: b.apiKey })).body.badgeToken
      const zero = await svg(token)
      t.equal(zero.status, 200)
      t.match(zero.headers['content-type'], /^image\/svg\+xml/)
      t.equal(zero.headers['cache-control'], 'public, max-age=3600')
      t.ok(zero.body.includes(BADGE_GREY) && !zero.body.includes(BADGE_GREEN), 'grey')
      t.ok(zero.body.includes('>0 / 30d<'))

      const now = nowSeconds(clock)
      const d = (kind: 'CHECK' | 'EXECUTE' | 'GRANT', createdAt = now) =>
        draft({ receiptId: newId('receipt'), tenantId: b.tenantId, kind, decision: 'DENY', createdAt })
      // One write through /v1/execute: its authorising receipt and its outcome receipt (ALLOW
      // now; null in older logs) are one gated write.
      const execute = (phase: 'authorized' | 'completed', decision: 'ALLOW' | null) =>
        draft({
          receiptId: newId('receipt'),
          tenantId: b.tenantId,
          kind: 'EXECUTE',
          decision,
          createdAt: now,
          detail: { phase },
        })
      await cp.auditTrail.log.append([
        d('CHECK'),
        d('CHECK'),
        d('EXECUTE'),
        d('GRANT'),
        d('CHECK', now - 31 * 86_400),
        execute('authorized', 'ALLOW'),
        execute('completed', 'ALLOW'),
        execute('completed', null),
      ])
      // The count a badge read is kept for five minutes per tenant (a public URL does not run a
      // 30-day count on every view): then it is read again.
      const kept = await svg(token)
      t.ok(kept.body.includes('>0 / 30d<'), 'within five minutes, the count it read')
      clock.advance(BADGE_COUNT_TTL_SECONDS * 1000)
      const some = await svg(token)
      t.ok(some.body.includes(BADGE_GREEN), 'green')
      t.ok(some.body.includes('>4 / 30d<'), 'CHECK and EXECUTE within 30 days, each write once')
      for (const secret of [label, 'Hostile', 'XYZ', b.tenantId, b.email, 'Acme', a.tenantId]) {
        t.notOk(some.body.includes(secret), `${secret} never leaves`)
      }
    })

    t.test('a badge token is never an API key', async (t) => {
      const token = (await api.post('/v1/badge/tokens', {}, { bearer: a.apiKey })).body.badgeToken
      for (const path of ['/v1/me', '/v1/receipts', '/v1/principals', '/v1/manifests']) {
        const r = await api.get(path, { bearer: token })
        t.equal(r.status, 401, path)
        t.equal(r.body.code, 'unknown_api_key')
      }
      t.equal((await api.post('/v1/badge/tokens', {}, { bearer: token })).status, 401)
    })

    t.test('revocation: own tokens only; the SVG is then 404', async (t) => {
      const token = (await api.post('/v1/badge/tokens', {}, { bearer: a.apiKey })).body.badgeToken
      t.equal((await svg(token)).status, 200)
      const foreign = await api.delete(`/v1/badge/tokens/${token}`, { bearer: b.apiKey })
      t.equal(foreign.status, 404)
      t.equal(foreign.body.code, 'badge_not_found')
      t.equal((await api.delete(`/v1/badge/tokens/${token}`)).status, 401)
      t.equal((await api.delete(`/v1/badge/tokens/${token}`, { bearer: a.apiKey })).status, 204)
      const gone = await svg(token)
      t.equal(gone.status, 404)
      t.same(gone.body, { error: 'badge not found', code: 'badge_not_found' })
      t.equal((await api.delete(`/v1/badge/tokens/${token}`, { bearer: a.apiKey })).status, 404, 'twice')
      for (const path of [
        `/v1/badge/svc_badge_${'x'.repeat(40)}.svg`,
        '/v1/badge/nonsense.svg',
        `/v1/badge/${token}`,
        `/v1/badge/${a.apiKey}.svg`,
      ]) {
        t.equal((await api.get(path)).status, 404, path)
      }
    })

    t.test('views are limited to 120 per minute per token', async (t) => {
      const token = (await api.post('/v1/badge/tokens', {}, { bearer: a.apiKey })).body.badgeToken
      const other = (await api.post('/v1/badge/tokens', {}, { bearer: a.apiKey })).body.badgeToken
      for (let i = 0; i < 120; i++) {
        const r = await svg(token)
        if (r.status !== 200) t.fail(`view ${i + 1}: ${r.status}`)
      }
      const limited = await svg(token)
      t.equal(limited.status, 429)
      t.equal(limited.body.code, 'rate_limited')
      t.ok(Number(limited.headers['retry-after']) > 0)
      t.equal((await svg(other)).status, 200, 'per token')
      clock.advance(61_000)
      t.equal((await svg(token)).status, 200, 'the window slides')
    })
  })
}

t.test('issuing or revoking a badge token commits with its receipt, or not at all', async (t) => {
  const { api, cp } = await startControlPlane(t, 'pglite-memory') // makes the database refuse
  const a = await api.newTenant()
  const sql = cp.database!.sql
  const tokens = () => sql`select revoked_at from badge_tokens where tenant_id = ${a.tenantId}`
  const badgeReceipts = async () =>
    (await sql<{ body: string }[]>`select body from receipts where tenant_id = ${a.tenantId} order by seq`)
      .map((r) => JSON.parse(r.body))
      .filter((r) => r.detail?.credential === 'badge_token')
      .map((r) => r.kind)
  const live = (await api.post('/v1/badge/tokens', {}, { bearer: a.apiKey })).body.badgeToken as string
  t.same(await badgeReceipts(), ['CREDENTIAL_ISSUED'])

  // Any append to the receipts table now fails, as a full disk or a lost primary would; and
  // so does any later update of a badge token, as if the process had died right after the write.
  await sql`create function refuse() returns trigger language plpgsql as
    $$ begin raise exception 'unavailable'; end $$`
  await sql`create trigger refuse_receipts before insert on receipts for each row execute function refuse()`
  await sql`create trigger refuse_badges before update on badge_tokens for each row execute function refuse()`
  const issued = await api.post('/v1/badge/tokens', {}, { bearer: a.apiKey })
  t.equal(issued.status, 500)
  t.equal((await tokens()).length, 1, 'no token was created without its receipt')
  await sql`drop trigger refuse_badges on badge_tokens`

  const revoked = await api.delete(`/v1/badge/tokens/${live}`, { bearer: a.apiKey })
  t.equal(revoked.status, 500)
  t.same(
    (await tokens()).map((r) => r.revoked_at),
    [null],
    'the token is not revoked without its receipt',
  )
  t.equal((await api.get(`/v1/badge/${live}.svg`)).status, 200, 'and still shows')

  await sql`drop trigger refuse_receipts on receipts`
  t.equal((await api.delete(`/v1/badge/tokens/${live}`, { bearer: a.apiKey })).status, 204)
  t.equal((await api.get(`/v1/badge/${live}.svg`)).status, 404)
  t.same(await badgeReceipts(), ['CREDENTIAL_ISSUED', 'CREDENTIAL_REVOKED'])
})

t.test('badge view limits hold across replicas sharing Redis', async (t) => {
  const redis = await openTestRedis()
  t.teardown(() => redis.close())
  const db = await openTestDatabase('postgres')
  t.teardown(() => db.close())
  const settings = { redis: { url: redis.url, keyPrefix: redis.prefix } }
  const key = ed25519().privateKey
  const one = await startControlPlane(t, 'postgres', { db, settings, auditSigningKey: key })
  const two = await startControlPlane(t, 'postgres', { db, settings, auditSigningKey: key, clock: one.clock })
  const a = await one.api.newTenant()
  const token = (await one.api.post('/v1/badge/tokens', {}, { bearer: a.apiKey })).body.badgeToken
  for (let i = 0; i < 120; i++) {
    const r = await (i % 2 ? one : two).api.get(`/v1/badge/${token}.svg`)
    if (r.status !== 200) t.fail(`view ${i + 1}: ${r.status}`)
  }
  t.equal((await one.api.get(`/v1/badge/${token}.svg`)).status, 429)
  t.equal((await two.api.get(`/v1/badge/${token}.svg`)).status, 429)
})
