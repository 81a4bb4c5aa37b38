import t from 'tap'
import { API_BACKENDS } from '../helpers/backends.js'
import { startControlPlane } from '../helpers/control-plane.js'

for (const kind of API_BACKENDS) {
  t.test(`custom verbs on ${kind}`, async (t) => {
    const { api, cp } = await startControlPlane(t, kind)
    const receipts = async (tenantId: string, k: string) =>
      (
        await cp.database!.sql<
          { body: string }[]
        >`select body from receipts where tenant_id = ${tenantId} and kind = ${k} order by seq`
      ).map((r) => JSON.parse(r.body))

    t.test('create: stored lowercase, case-insensitive lookup, usable at once, VERB_CREATE', async (t) => {
      const o = await api.newTenant()
      const r = await api.post(
        '/v1/verbs',
        { name: 'Billing.Refund_Full', description: 'Full refund' },
        { bearer: o.apiKey },
      )
      t.equal(r.status, 201)
      t.match(r.body, {
        name: 'billing.refund_full',
        builtin: false,
        status: 'live',
        description: 'Full refund',
        aliasOf: null,
        deprecatedAt: null,
        createdAt: Number,
      })
      t.same((await api.get('/v1/verbs/BILLING.refund_FULL', { bearer: o.apiKey })).body, r.body)
      const list = await api.get('/v1/verbs', { bearer: o.apiKey })
      t.equal(list.body.tenantId, o.tenantId)
      t.match(list.body.verbs[0], { name: 'admit', builtin: true, status: 'live', defaultMode: 'step_up' })
      t.match(list.body.verbs.at(-1), { name: 'billing.refund_full', builtin: false })
      const policy = await api.put('/v1/policy', { 'billing.refund_full': 'allow' }, { bearer: o.apiKey })
      t.equal(policy.status, 200, 'usable in policies immediately')
      t.same((await api.get('/v1/policy', { bearer: o.apiKey })).body.customVerbs, ['billing.refund_full'])
      t.match(await receipts(o.tenantId, 'VERB_CREATE'), [
        { verb: 'billing.refund_full', detail: { description: 'Full refund' } },
      ])
    })

    t.test('name rules: 400 invalid_name or builtin_collision, 409 name_taken', async (t) => {
      const o = await api.newTenant()
      for (const name of ['refund', 'REFUND', 'demo_write', 'verify_human']) {
        const r = await api.post('/v1/verbs', { name }, { bearer: o.apiKey })
        t.equal(r.status, 400, name)
        t.equal(r.body.code, 'builtin_collision')
      }
      for (const name of [
        'nodot',
        `a.${'b'.repeat(63)}`,
        'a-b.c',
        'a.b c',
        '.a',
        'a.',
        'a..b',
        '',
        'a.b/c',
      ]) {
        const r = await api.post('/v1/verbs', { name }, { bearer: o.apiKey })
        t.equal(r.status, 400, JSON.stringify(name))
        t.equal(r.body.code, 'invalid_name')
      }
      t.equal(
        (await api.post('/v1/verbs', { name: `a.${'b'.repeat(62)}` }, { bearer: o.apiKey })).status,
        201,
        '64 characters is fine',
      )
      t.equal((await api.post('/v1/verbs', { name: 'x.y' }, { bearer: o.apiKey })).status, 201)
      const taken = await api.post('/v1/verbs', { name: 'X.Y' }, { bearer: o.apiKey })
      t.equal(taken.status, 409)
      t.equal(taken.body.code, 'name_taken')
      t.equal((await api.post('/v1/verbs', { name: 'x.y', extra: 1 }, { bearer: o.apiKey })).status, 400)
      const other = await api.newTenant()
      t.equal(
        (await api.post('/v1/verbs', { name: 'x.y' }, { bearer: other.apiKey })).status,
        201,
        'per tenant',
      )
      t.equal((await api.get('/v1/verbs/x.y', { bearer: o.apiKey })).status, 200)
      t.equal((await api.get('/v1/verbs/nope.nope', { bearer: o.apiKey })).status, 404)
      t.equal(
        (await api.get('/v1/verbs/refund', { bearer: o.apiKey })).status,
        404,
        'GET one is for custom verbs',
      )
    })

    t.test(
      'rename: deprecated alias, policies migrated (+1 each), alias still resolves, names never reused',
      async (t) => {
        const o = await api.newTenant()
        await api.post('/v1/verbs', { name: 'ops.deploy', description: 'ship it' }, { bearer: o.apiKey })
        await api.post('/v1/verbs', { name: 'ops.other' }, { bearer: o.apiKey })
        const p = await api.post('/v1/principals', { name: 'p' }, { bearer: o.apiKey })
        await api.put('/v1/policy', { 'ops.deploy': 'allow', refund: 'deny' }, { bearer: o.apiKey })
        await api.put('/v1/policies/environments/prod', { 'ops.deploy': 'step_up' }, { bearer: o.apiKey })
        await api.put('/v1/policies/environments/dev', { 'ops.other': 'allow' }, { bearer: o.apiKey })
        await api.put(
          `/v1/policies/principals/${p.body.principalId}`,
          { 'ops.deploy': 'deny' },
          { bearer: o.apiKey },
        )

        const r = await api.patch('/v1/verbs/OPS.DEPLOY', { name: 'ops.release' }, { bearer: o.apiKey })
        t.equal(r.status, 200)
        t.match(r.body, { name: 'ops.release', status: 'live', description: 'ship it', aliasOf: null })
        t.match((await api.get('/v1/verbs/ops.deploy', { bearer: o.apiKey })).body, {
          name: 'ops.deploy',
          status: 'deprecated',
          aliasOf: 'ops.release',
          deprecatedAt: Number,
        })

        const tenant = await api.get('/v1/policy', { bearer: o.apiKey })
        t.same(tenant.body.policy, { 'ops.release': 'allow', refund: 'deny' })
        t.equal(tenant.body.version, 2)
        t.same(tenant.body.customVerbs, ['ops.other', 'ops.release'])
        const prod = await api.get('/v1/policies/environments/prod', { bearer: o.apiKey })
        t.same([prod.body.policy, prod.body.version], [{ 'ops.release': 'step_up' }, 2])
        t.equal(
          (await api.get('/v1/policies/environments/dev', { bearer: o.apiKey })).body.version,
          1,
          'a layer that did not name it is untouched',
        )
        const prn = await api.get(`/v1/policies/principals/${p.body.principalId}`, { bearer: o.apiKey })
        t.same([prn.body.policy, prn.body.version], [{ 'ops.release': 'deny' }, 2])

        const check = await api.post('/v1/check', { verb: 'ops.deploy' }, { bearer: o.apiKey })
        t.match(
          check.body,
          { decision: 'ALLOW', verb: 'ops.release', requestedVerb: 'ops.deploy' },
          'the old name still resolves, both names recorded',
        )

        const stale = await api.put(
          '/v1/policy',
          { 'ops.deploy': 'deny', 'ops.other': 'deny' },
          { bearer: o.apiKey },
        )
        t.equal(stale.status, 400)
        t.same([stale.body.code, stale.body.verbs], ['deprecated_verb', ['ops.deploy']])
        t.equal(
          (await api.post('/v1/verbs', { name: 'ops.deploy' }, { bearer: o.apiKey })).body.code,
          'name_taken',
          'a deprecated name is never reusable',
        )
        t.equal(
          (await api.patch('/v1/verbs/ops.other', { name: 'ops.deploy' }, { bearer: o.apiKey })).status,
          409,
        )
        t.equal(
          (await api.patch('/v1/verbs/ops.other', { name: 'ops.release' }, { bearer: o.apiKey })).status,
          409,
        )
        t.equal(
          (await api.patch('/v1/verbs/ops.deploy', { name: 'ops.again' }, { bearer: o.apiKey })).status,
          404,
          'a deprecated verb cannot be renamed',
        )
        t.equal(
          (await api.patch('/v1/verbs/ops.deploy', { description: 'x' }, { bearer: o.apiKey })).status,
          404,
          '…or redescribed',
        )
        t.equal(
          (await api.patch('/v1/verbs/ops.deploy', { name: 'BAD' }, { bearer: o.apiKey })).status,
          404,
          '…even with an invalid new name',
        )
        t.equal(
          (await api.post('/v1/verbs', { name: `a.${'b'.repeat(300)}` }, { bearer: o.apiKey })).body.code,
          'invalid_name',
          'a long name breaks the name rules',
        )

        // A second rename flattens the alias chain.
        await api.patch('/v1/verbs/ops.release', { name: 'ops.ship' }, { bearer: o.apiKey })
        t.equal((await api.get('/v1/verbs/ops.deploy', { bearer: o.apiKey })).body.aliasOf, 'ops.ship')
        t.match((await api.post('/v1/check', { verb: 'OPS.DEPLOY' }, { bearer: o.apiKey })).body, {
          verb: 'ops.ship',
          requestedVerb: 'OPS.DEPLOY',
        })

        const updates = await receipts(o.tenantId, 'VERB_UPDATE')
        t.equal(updates.length, 2)
        t.match(updates[0], {
          verb: 'ops.release',
          requestedVerb: 'ops.deploy',
          detail: { rename: { from: 'ops.deploy', to: 'ops.release' } },
        })
        t.equal(updates[0].detail.migratedPolicies.length, 3)
      },
    )

    t.test('patch: description (empty clears), nothing to update, bad names', async (t) => {
      const o = await api.newTenant()
      await api.post('/v1/verbs', { name: 'a.b', description: 'old' }, { bearer: o.apiKey })
      t.equal(
        (await api.patch('/v1/verbs/a.b', { description: 'new' }, { bearer: o.apiKey })).body.description,
        'new',
      )
      t.equal(
        (await api.patch('/v1/verbs/a.b', { description: '' }, { bearer: o.apiKey })).body.description,
        '',
      )
      for (const body of [{}, undefined])
        t.equal((await api.patch('/v1/verbs/a.b', body, { bearer: o.apiKey })).body.code, 'nothing_to_update')
      t.equal(
        (await api.patch('/v1/verbs/a.b', { name: 'nodot' }, { bearer: o.apiKey })).body.code,
        'invalid_name',
      )
      t.equal(
        (await api.patch('/v1/verbs/a.b', { name: 'admit' }, { bearer: o.apiKey })).body.code,
        'builtin_collision',
      )
      t.equal(
        (await api.patch('/v1/verbs/missing.verb', { description: 'x' }, { bearer: o.apiKey })).status,
        404,
      )
      t.equal(
        (await api.patch('/v1/verbs/refund', { description: 'x' }, { bearer: o.apiKey })).status,
        404,
        'built-ins are not custom verbs',
      )
      const other = await api.newTenant()
      t.equal(
        (await api.patch('/v1/verbs/a.b', { description: 'x' }, { bearer: other.apiKey })).status,
        404,
        "another tenant's verb is missing",
      )
    })

    t.test('the limit is 200 per tenant, deprecated ones included', async (t) => {
      const o = await api.newTenant()
      for (let i = 0; i < 199; i++) {
        const r = await api.post('/v1/verbs', { name: `v.n${i}` }, { bearer: o.apiKey })
        if (r.status !== 201) t.fail(`create ${i}: ${r.status}`)
      }
      t.equal(
        (await api.patch('/v1/verbs/v.n0', { name: 'v.renamed' }, { bearer: o.apiKey })).status,
        200,
        'the rename takes the 200th slot',
      )
      const full = await api.post('/v1/verbs', { name: 'v.one_more' }, { bearer: o.apiKey })
      t.equal(full.status, 409)
      t.match(full.body, { code: 'verb_limit_reached', limit: 200 })
      t.equal(
        (await api.patch('/v1/verbs/v.n1', { name: 'v.renamed2' }, { bearer: o.apiKey })).body.code,
        'verb_limit_reached',
      )
      t.equal(
        (await api.patch('/v1/verbs/v.n1', { description: 'still fine' }, { bearer: o.apiKey })).status,
        200,
      )
    })

    t.test(
      'concurrent registry changes: each is 201 or 409 registry_conflict, and none is lost',
      async (t) => {
        const o = await api.newTenant()
        const names = Array.from({ length: 12 }, (_, i) => `race.v${i}`)
        const results = await Promise.all(
          names.map((name) => api.post('/v1/verbs', { name }, { bearer: o.apiKey })),
        )
        const created = names.filter((_, i) => results[i]?.status === 201)
        for (const r of results)
          t.ok(
            r.status === 201 || (r.status === 409 && r.body.code === 'registry_conflict'),
            `${r.status} ${r.body.code ?? ''}`,
          )
        t.ok(created.length >= 1)
        const live = (await api.get('/v1/verbs', { bearer: o.apiKey })).body.verbs
          .filter((v: { builtin: boolean }) => !v.builtin)
          .map((v: { name: string }) => v.name)
        t.same(live.sort(), created.sort(), 'exactly the acknowledged creates exist')
        const creates = await receipts(o.tenantId, 'VERB_CREATE')
        t.equal(creates.length, created.length, 'one receipt per acknowledged create')
        // Concurrent renames of one verb: exactly one wins.
        await api
          .post('/v1/verbs', { name: 'race.base' }, { bearer: o.apiKey })
          .then(async (r) =>
            r.status === 201 ? r : api.post('/v1/verbs', { name: 'race.base' }, { bearer: o.apiKey }),
          )
        const renames = await Promise.all(
          ['race.x', 'race.y', 'race.z'].map((name) =>
            api.patch('/v1/verbs/race.base', { name }, { bearer: o.apiKey }),
          ),
        )
        t.equal(renames.filter((r) => r.status === 200).length, 1, 'one rename wins')
        for (const r of renames.filter((x) => x.status !== 200))
          t.ok([404, 409].includes(r.status), `loser: ${r.status} ${r.body.code}`)
      },
    )
  })
}
