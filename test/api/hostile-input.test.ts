import t from 'tap'
import { startControlPlane } from '../helpers/control-plane.js'

/** Inputs JSON allows but storage does not: each must be a clear 4xx, never a 500. */
const NUL = '{"s":"a\\u0000b"}'
const LONE = '{"s":"\\ud800"}'
const HUGE = '{"n":1e400}'
const deep = (n: number) => `${'{"a":'.repeat(n)}1${'}'.repeat(n)}`

t.test('hostile input never produces a 500', async (t) => {
  // Storage that refuses what JSON allows (NUL in text) is the point: a real database.
  const { api } = await startControlPlane(t, 'pglite-memory')
  const o = await api.newTenant()
  const bodies: [string, string][] = [
    ['nul', NUL],
    ['lone surrogate', LONE],
    ['1e400', HUGE],
    ['nesting 100', deep(100)],
    ['nesting 20000', deep(20000)],
  ]
  const shaped = (field: string, raw: string) =>
    raw.replace('{"s":', `{"${field}":`).replace('{"n":', `{"${field}":`)
  const endpoints: [string, string, string | undefined, (raw: string) => string][] = [
    ['POST', '/v1/keys', undefined, (raw) => shaped('email', raw)],
    ['POST', '/v1/principals', o.apiKey, (raw) => shaped('name', raw)],
    ['POST', '/v1/verbs', o.apiKey, (raw) => `{"name":"a.b","description":${raw.slice(5, -1)}}`],
    ['PUT', '/v1/policy', o.apiKey, (raw) => raw],
    ['POST', '/v1/check', o.apiKey, (raw) => `{"verb":"verify","target":${raw.slice(5, -1)}}`],
    ['POST', '/v1/grants', o.sponsorToken, (raw) => `{"verb":"provision","reason":${raw.slice(5, -1)}}`],
    ['POST', '/v1/revoke', o.sponsorToken, (raw) => shaped('keyId', raw)],
    ['POST', '/v1/badge/tokens', o.apiKey, (raw) => shaped('label', raw)],
  ]
  for (const [method, url, bearer, make] of endpoints) {
    for (const [label, raw] of bodies) {
      const r = await api.call(method, url, undefined, { raw: make(raw), ...(bearer ? { bearer } : {}) })
      t.ok(r.status >= 400 && r.status < 500, `${method} ${url} with ${label}: ${r.status}`)
      t.type(r.body?.error, 'string', 'a JSON error')
    }
  }
  for (const url of [
    '/v1/receipts/a%00b',
    '/v1/principals/a%00b',
    '/v1/verbs/a%00.b',
    '/v1/agent/actions/x%00/approve',
    '/v1/principals/%E0%A4%A',
    '/v1/principals/%ED%A0%80',
  ]) {
    const r = await api.call(
      url.endsWith('approve') ? 'POST' : 'GET',
      url,
      url.endsWith('approve') ? {} : undefined,
      { bearer: o.apiKey },
    )
    t.ok(r.status >= 400 && r.status < 500, `${url}: ${r.status}`)
  }
  const ok = await api.post('/v1/principals', { name: 'plain ascii is fine' }, { bearer: o.apiKey })
  t.equal(ok.status, 201)
  const emoji = await api.post(
    '/v1/verbs',
    { name: 'a.emoji', description: 'paired surrogates are fine: 😀' },
    { bearer: o.apiKey },
  )
  t.equal(emoji.status, 201)
})
