import t from 'tap'
import { BUILTIN_VERBS } from '../../src/core/verbs.js'
import { API_BACKENDS } from '../helpers/backends.js'
import { startControlPlane } from '../helpers/control-plane.js'

for (const kind of API_BACKENDS) {
  t.test(`policies on ${kind}`, async (t) => {
    const { api, cp } = await startControlPlane(t, kind)

    t.test(
      'the tenant default: version 0 until configured, then +1 per PUT, merging sent verbs',
      async (t) => {
        const o = await api.newTenant()
        const fresh = await api.get('/v1/policy', { bearer: o.apiKey })
        t.equal(fresh.status, 200)
        t.match(fresh.body, {
          policyId: `pol_${o.tenantId}_tenant`,
          scope: 'tenant',
          environment: null,
          policy: {},
          version: 0,
          updatedAt: null,
          tenantId: o.tenantId,
          customVerbs: [],
        })
        t.same(fresh.body.effectivePolicy, BUILTIN_VERBS)
        t.same(fresh.body.modes, ['allow', 'deny', 'require_grant', 'step_up'])
        t.same(fresh.body.verbs, Object.keys(BUILTIN_VERBS))
        const put = await api.put('/v1/policy', { refund: 'allow' }, { bearer: o.apiKey })
        t.equal(put.status, 200)
        t.match(put.body, {
          version: 1,
          policy: { refund: 'allow' },
          effectivePolicy: { refund: 'allow', admit: 'step_up' },
        })
        t.type(put.body.updatedAt, 'number')
        const wrapped = await api.put('/v1/policy', { policy: { ADMIT: 'deny' } }, { bearer: o.apiKey })
        t.same(
          wrapped.body.policy,
          { refund: 'allow', admit: 'deny' },
          'merged; names are case-insensitive and stored lowercase',
        )
        t.equal(wrapped.body.version, 2)
        t.equal(
          (await api.put('/v1/policy', { refund: 'allow' }, { bearer: o.apiKey })).body.version,
          3,
          'every successful PUT counts',
        )
      },
    )

    t.test('400s: empty body, unknown verb, unknown mode, inherit outside principals', async (t) => {
      const o = await api.newTenant()
      const cases: [unknown, string, Record<string, unknown>?][] = [
        [{}, 'empty_policy'],
        [undefined, 'empty_policy'],
        [{ policy: {} }, 'empty_policy'],
        [{ 'made.up': 'allow', refund: 'allow' }, 'unknown_verb', { verbs: ['made.up'] }],
        [{ refund: 'maybe' }, 'unknown_mode', { verbs: ['refund'] }],
        [{ refund: 5 }, 'unknown_mode'],
        [{ refund: 'inherit' }, 'unknown_mode'],
      ]
      for (const [body, code, detail] of cases) {
        const r = await api.put('/v1/policy', body, { bearer: o.apiKey })
        t.equal(r.status, 400, JSON.stringify(body))
        t.equal(r.body.code, code)
        if (detail) t.match(r.body, detail)
      }
      t.equal((await api.put('/v1/policy', [1], { bearer: o.apiKey })).status, 400, 'not a map')
      t.equal((await api.get('/v1/policy', { bearer: o.apiKey })).body.version, 0, 'nothing was written')
    })

    t.test('environment overrides: only that layer moves; unknown environments are 400', async (t) => {
      const o = await api.newTenant()
      await api.put('/v1/policy', { refund: 'allow' }, { bearer: o.apiKey })
      const fresh = await api.get('/v1/policies/environments/prod', { bearer: o.apiKey })
      t.match(fresh.body, {
        policyId: `pol_${o.tenantId}_env_prod`,
        scope: 'environment',
        environment: 'prod',
        policy: {},
        version: 0,
        effectivePolicy: { refund: 'allow' },
      })
      const put = await api.put(
        '/v1/policies/environments/prod',
        { refund: 'deny', verify: 'step_up' },
        { bearer: o.apiKey },
      )
      t.match(put.body, {
        version: 1,
        policy: { refund: 'deny', verify: 'step_up' },
        effectivePolicy: { refund: 'deny', verify: 'step_up', admit: 'step_up' },
      })
      t.match(put.body.policyProvenance, { refund: 'environment', verify: 'environment', admit: 'tenant' })
      t.equal(
        (await api.get('/v1/policy', { bearer: o.apiKey })).body.version,
        1,
        'the tenant layer is untouched',
      )
      t.equal(
        (await api.get('/v1/policies/environments/dev', { bearer: o.apiKey })).body.version,
        0,
        'other environments too',
      )
      for (const env of ['qa', 'PROD', '']) {
        const g = await api.get(`/v1/policies/environments/${env}`, { bearer: o.apiKey })
        t.equal(g.status, 400, JSON.stringify(env))
        t.equal(g.body.code, 'unknown_environment')
        const p = await api.put(`/v1/policies/environments/${env}`, { refund: 'deny' }, { bearer: o.apiKey })
        t.equal(p.body.code, 'unknown_environment')
      }
    })

    t.test(
      'principal overrides: inherit, environment folding, inert, 404 and principal_inactive',
      async (t) => {
        const o = await api.newTenant()
        const p = await api.post('/v1/principals', { name: 'bot' }, { bearer: o.apiKey })
        const id = p.body.principalId
        const fresh = await api.get(`/v1/policies/principals/${id}`, { bearer: o.apiKey })
        t.match(fresh.body, {
          policyId: `pol_${o.tenantId}_prn_${id}`,
          scope: 'principal',
          principalId: id,
          principalName: 'bot',
          policy: {},
          version: 0,
          inert: false,
        })
        await api.put('/v1/policies/environments/dev', { admit: 'allow' }, { bearer: o.apiKey })
        const put = await api.put(
          `/v1/policies/principals/${id}`,
          { refund: 'deny', verify: 'require_grant' },
          { bearer: o.apiKey },
        )
        t.match(put.body, {
          version: 1,
          principalId: id,
          principalName: 'bot',
          policy: { refund: 'deny', verify: 'require_grant' },
        })
        t.match(put.body.policyProvenance, { refund: 'principal', admit: 'tenant' })
        const withEnv = await api.get(`/v1/policies/principals/${id}?environment=dev`, { bearer: o.apiKey })
        t.match(withEnv.body, {
          environment: 'dev',
          effectivePolicy: { admit: 'allow', refund: 'deny' },
          policyProvenance: { admit: 'environment', refund: 'principal' },
        })
        const inherit = await api.put(
          `/v1/policies/principals/${id}`,
          { verify: 'inherit' },
          { bearer: o.apiKey },
        )
        t.same(inherit.body.policy, { refund: 'deny' }, 'inherit removes exactly that verb')
        t.equal(inherit.body.version, 2)
        t.equal(
          (await api.get(`/v1/policies/principals/${id}?environment=qa`, { bearer: o.apiKey })).body.code,
          'unknown_environment',
        )

        await api.patch(`/v1/principals/${id}`, { disabled: true }, { bearer: o.apiKey })
        const inert = await api.get(`/v1/policies/principals/${id}`, { bearer: o.apiKey })
        t.match(
          inert.body,
          {
            inert: true,
            policy: { refund: 'deny' },
            effectivePolicy: { refund: 'step_up' },
            policyProvenance: { refund: 'tenant' },
          },
          'kept, but not applied',
        )
        const refused = await api.put(
          `/v1/policies/principals/${id}`,
          { refund: 'allow' },
          { bearer: o.apiKey },
        )
        t.equal(refused.status, 400)
        t.equal(refused.body.code, 'principal_inactive')
        await api.patch(`/v1/principals/${id}`, { disabled: false }, { bearer: o.apiKey })
        t.match(
          (await api.get(`/v1/policies/principals/${id}`, { bearer: o.apiKey })).body,
          { inert: false, effectivePolicy: { refund: 'deny' } },
          're-armed',
        )

        await api.delete(`/v1/principals/${id}`, { bearer: o.apiKey })
        const tomb = await api.get(`/v1/policies/principals/${id}`, { bearer: o.apiKey })
        t.equal(tomb.status, 200, 'tombstoned principals still answer')
        t.equal(tomb.body.inert, true)
        t.equal(
          (await api.put(`/v1/policies/principals/${id}`, { refund: 'allow' }, { bearer: o.apiKey })).body
            .code,
          'principal_inactive',
        )

        const other = await api.newTenant()
        for (const call of [
          () => api.get(`/v1/policies/principals/${other.principalId}`, { bearer: o.apiKey }),
          () =>
            api.put(
              `/v1/policies/principals/${other.principalId}`,
              { refund: 'allow' },
              { bearer: o.apiKey },
            ),
          () => api.get('/v1/policies/principals/prn_nope', { bearer: o.apiKey }),
        ]) {
          const r = await call()
          t.equal(r.status, 404)
          t.equal(r.body.code, 'principal_not_found')
        }
      },
    )

    t.test(
      'GET /v1/policies: tenant first, configured environments in order, then principal overrides',
      async (t) => {
        const o = await api.newTenant()
        const empty = await api.get('/v1/policies', { bearer: o.apiKey })
        t.same(empty.body.environments, ['dev', 'staging', 'prod'])
        t.same(
          empty.body.policies.map((p: { scope: string }) => p.scope),
          ['tenant'],
          'the tenant default always; unconfigured environments omitted',
        )
        const a = await api.post('/v1/principals', { name: 'a' }, { bearer: o.apiKey })
        const b = await api.post('/v1/principals', { name: 'b' }, { bearer: o.apiKey })
        await api.put(
          `/v1/policies/principals/${b.body.principalId}`,
          { admit: 'deny' },
          { bearer: o.apiKey },
        )
        await api.put('/v1/policies/environments/prod', { admit: 'deny' }, { bearer: o.apiKey })
        await api.put('/v1/policies/environments/dev', { admit: 'allow' }, { bearer: o.apiKey })
        await api.put(
          `/v1/policies/principals/${a.body.principalId}`,
          { admit: 'allow' },
          { bearer: o.apiKey },
        )
        const all = await api.get('/v1/policies', { bearer: o.apiKey })
        t.same(
          all.body.policies.map(
            (p: { scope: string; environment: string | null; principalName?: string }) => [
              p.scope,
              p.environment,
              p.principalName ?? null,
            ],
          ),
          [
            ['tenant', null, null],
            ['environment', 'dev', null],
            ['environment', 'prod', null],
            ['principal', null, 'a'],
            ['principal', null, 'b'],
          ],
        )
        for (const p of all.body.policies)
          t.match(p, { policyId: /^pol_/, tenantId: o.tenantId, version: Number, policy: Object })
      },
    )

    t.test('concurrent PUTs: each answers the version it wrote, as its receipt records it', async (t) => {
      const o = await api.newTenant()
      const p = await api.post('/v1/principals', { name: 'racer' }, { bearer: o.apiKey })
      const modes = ['allow', 'deny', 'step_up', 'require_grant']
      for (const url of [
        '/v1/policy',
        '/v1/policies/environments/staging',
        `/v1/policies/principals/${p.body.principalId}`,
      ]) {
        const puts = await Promise.all(
          Array.from({ length: 8 }, (_, i) => api.put(url, { refund: modes[i % 4] }, { bearer: o.apiKey })),
        )
        t.same(
          puts.map((r) => r.status),
          Array(8).fill(200),
          url,
        )
        const versions = puts.map((r) => r.body.version as number).sort((a, b) => a - b)
        t.same(versions, [1, 2, 3, 4, 5, 6, 7, 8], `${url}: one version per PUT, none answered twice`)
        // Each answer shows the layer as its own PUT left it: the mode it sent.
        const receipts = await cp.database!.sql<{ body: string }[]>`
          select body from receipts where tenant_id = ${o.tenantId} and kind = 'POLICY_UPDATE'`
        const sentAt = new Map<number, unknown>()
        for (const r of receipts) {
          const b = JSON.parse(r.body)
          if (b.detail.policyId === puts[0]!.body.policyId)
            sentAt.set(b.detail.layerVersion, b.detail.changes.refund?.to ?? 'unchanged')
        }
        for (const r of puts) {
          const to = sentAt.get(r.body.version)
          if (to !== 'unchanged') t.equal(r.body.policy.refund, to, `${url} v${r.body.version}`)
        }
      }
    })

    t.test('every PUT writes a POLICY_UPDATE receipt; agent keys cannot touch policy', async (t) => {
      const o = await api.newTenant()
      await api.put('/v1/policies/environments/staging', { refund: 'allow' }, { bearer: o.apiKey })
      const rows = await cp.database!.sql<
        { body: string }[]
      >`select body from receipts where tenant_id = ${o.tenantId} and kind = 'POLICY_UPDATE'`
      t.equal(rows.length, 1)
      t.match(JSON.parse(rows[0]!.body), {
        environment: 'staging',
        detail: { scope: 'environment', layerVersion: 1, changes: { refund: { from: null, to: 'allow' } } },
      })
      const agent = await api.post('/v1/keys', { email: o.email, scope: 'agent' }, { bearer: o.apiKey })
      for (const [m, u] of [
        ['GET', '/v1/policy'],
        ['PUT', '/v1/policy'],
        ['GET', '/v1/policies'],
        ['PUT', '/v1/policies/environments/dev'],
      ]) {
        t.equal(
          (
            await api.call(m as string, u as string, m === 'PUT' ? { refund: 'allow' } : undefined, {
              bearer: agent.body.apiKey,
            })
          ).status,
          403,
          `${m} ${u}`,
        )
      }
    })
  })
}
