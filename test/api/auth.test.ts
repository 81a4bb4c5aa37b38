import t from 'tap'
import { newBadgeToken } from '../../src/core/credentials.js'
import { API_BACKENDS } from '../helpers/backends.js'
import { startControlPlane } from '../helpers/control-plane.js'

const KEY_ENDPOINTS: [string, string][] = [
  ['GET', '/v1/me'],
  ['GET', '/v1/principals'],
  ['POST', '/v1/principals'],
  ['POST', '/v1/tenant/invites'],
]

for (const kind of API_BACKENDS) {
  t.test(`authentication on ${kind}`, async (t) => {
    const { api } = await startControlPlane(t, kind)
    const o = await api.newTenant()
    const unknownKey = { error: 'unknown API key', code: 'unknown_api_key' }

    t.test(
      'K endpoints: missing, malformed, unknown, sponsor and badge credentials all get the API-key error',
      async (t) => {
        const bad: (string | undefined)[] = [
          undefined,
          'svc_short',
          `svc_${'x'.repeat(40)}`,
          'garbage',
          o.sponsorToken,
          newBadgeToken(),
          `${o.apiKey}x`,
        ]
        for (const [method, url] of KEY_ENDPOINTS) {
          for (const bearer of bad) {
            const r = await api.call(
              method,
              url,
              method === 'POST' ? { name: 'x' } : undefined,
              bearer ? { bearer } : {},
            )
            t.equal(r.status, 401, `${method} ${url} with ${bearer?.slice(0, 8)}`)
            t.same(r.body, unknownKey)
          }
        }
        const basic = await api.get('/v1/me', {
          headers: { authorization: `Basic ${Buffer.from('a:b').toString('base64')}` },
        })
        t.equal(basic.status, 401)
      },
    )

    t.test('S endpoints: an API key gets `sponsor token required`', async (t) => {
      for (const bearer of [o.apiKey, undefined, newBadgeToken()]) {
        const r = await api.post('/v1/sponsor/rotate', undefined, bearer ? { bearer } : {})
        t.equal(r.status, 401)
        t.same(r.body, { error: 'sponsor token required', code: 'sponsor_token_required' })
      }
    })

    t.test('agent keys reach only check, verify, execute and me', async (t) => {
      const agent = await api.post('/v1/keys', { email: o.email, scope: 'agent' }, { bearer: o.apiKey })
      t.equal((await api.get('/v1/me', { bearer: agent.body.apiKey })).status, 200)
      for (const [method, url] of KEY_ENDPOINTS.slice(1)) {
        const r = await api.call(method, url, method === 'POST' ? { name: 'x' } : undefined, {
          bearer: agent.body.apiKey,
        })
        t.equal(r.status, 403, `${method} ${url}`)
        t.same(r.body, { error: 'insufficient scope', code: 'insufficient_scope' })
      }
    })

    t.test('credentials are checked before the body: 401 and 403 come first, never 400 or 404', async (t) => {
      const agent = await api.post('/v1/keys', { email: o.email, scope: 'agent' }, { bearer: o.apiKey })
      const cases: [string, string, unknown, string | undefined, number, string][] = [
        ['POST', '/v1/grants', {}, o.apiKey, 401, 'sponsor token required'],
        ['POST', '/v1/revoke', { nonsense: true }, undefined, 401, 'sponsor token required'],
        ['POST', '/v1/principals', {}, undefined, 401, 'unknown API key'],
        ['POST', '/v1/principals', { nope: 1 }, agent.body.apiKey, 403, 'insufficient scope'],
        ['GET', `/v1/principals/${'x'.repeat(200)}`, undefined, undefined, 401, 'unknown API key'],
        ['PUT', '/v1/policy', [1, 2], undefined, 401, 'unknown API key'],
        ['POST', '/v1/check', { verb: 5 }, o.sponsorToken, 401, 'unknown API key'],
      ]
      for (const [method, url, body, bearer, status, error] of cases) {
        const r = await api.call(method, url, body, bearer ? { bearer } : {})
        t.same([r.status, r.body.error], [status, error], `${method} ${url.slice(0, 40)}`)
      }
      const malformed = await api.post('/v1/principals', undefined, { raw: '{bad', bearer: undefined })
      t.equal(malformed.status, 401, 'even a malformed body is answered with the credential error first')
    })

    t.test('sponsor token rotation kills the old token at once', async (t) => {
      const x = await api.newTenant()
      const r = await api.post('/v1/sponsor/rotate', undefined, { bearer: x.sponsorToken })
      t.equal(r.status, 200)
      t.match(r.body.sponsorToken, /^svc_sp_/)
      t.equal((await api.post('/v1/sponsor/rotate', undefined, { bearer: x.sponsorToken })).status, 401)
      t.equal((await api.post('/v1/sponsor/rotate', undefined, { bearer: r.body.sponsorToken })).status, 200)
    })

    t.test(
      'racing rotations of one token: one new token, the rest refused, none dead on arrival',
      async (t) => {
        const x = await api.newTenant()
        const answers = await Promise.all(
          Array.from({ length: 4 }, () =>
            api.post('/v1/sponsor/rotate', undefined, { bearer: x.sponsorToken }),
          ),
        )
        const won = answers.filter((r) => r.status === 200)
        t.equal(won.length, 1, 'exactly one rotation replaced the token')
        // Refused in the transaction (409), or at the door once the winner had committed (401).
        for (const r of answers.filter((a) => a.status !== 200))
          t.ok(
            (r.status === 409 && r.body.code === 'credential_changed') ||
              (r.status === 401 && r.body.code === 'sponsor_token_required'),
            `${r.status} ${r.body.code}`,
          )
        t.equal(
          (await api.get('/v1/revoked', { bearer: won[0]?.body.sponsorToken })).status,
          200,
          'the one handed out works',
        )
      },
    )

    t.test('TOTP re-enrolment returns a new secret and backup codes', async (t) => {
      const x = await api.newTenant()
      const r = await api.post('/v1/sponsor/totp', undefined, { bearer: x.sponsorToken })
      t.equal(r.status, 200)
      t.not(r.body.totp.secret, x.totp.secret)
      t.equal(r.body.totp.backupCodes.length, 10)
    })
  })
}
