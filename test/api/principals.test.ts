import t from 'tap'
import { API_BACKENDS } from '../helpers/backends.js'
import { startControlPlane } from '../helpers/control-plane.js'

for (const kind of API_BACKENDS) {
  t.test(`principals on ${kind}`, async (t) => {
    const { api, cp } = await startControlPlane(t, kind)
    const receiptsOf = async (tenantId: string) =>
      cp.database!.sql<
        { kind: string; body: string }[]
      >`select kind, body from receipts where tenant_id = ${tenantId} order by seq`

    t.test('create, get and list, oldest first, with keyCount', async (t) => {
      const o = await api.newTenant()
      const a = await api.post('/v1/principals', { name: 'Billing Bot' }, { bearer: o.apiKey })
      t.equal(a.status, 201)
      t.match(a.body, {
        principalId: /^prn_/,
        tenantId: o.tenantId,
        name: 'Billing Bot',
        disabled: false,
        keyCount: 0,
        deletedAt: null,
      })
      const b = await api.post('/v1/principals', { name: 'ops.team_2', disabled: true }, { bearer: o.apiKey })
      t.equal(b.status, 201)
      t.equal(b.body.disabled, true)
      const got = await api.get(`/v1/principals/${a.body.principalId}`, { bearer: o.apiKey })
      t.same(got.body, a.body)
      const list = await api.get('/v1/principals', { bearer: o.apiKey })
      t.equal(list.body.tenantId, o.tenantId)
      t.same(
        list.body.principals.map((p: { name: string }) => p.name),
        ['default', 'Billing Bot', 'ops.team_2'],
      )
      t.equal(list.body.principals[0].keyCount, 1, 'the first key belongs to the default principal')
      const kinds = (await receiptsOf(o.tenantId)).map((r) => r.kind)
      t.same(
        kinds.filter((k) => k === 'PRINCIPAL_CREATE').length,
        3,
        'one PRINCIPAL_CREATE each (default included)',
      )
      const created = JSON.parse((await receiptsOf(o.tenantId)).at(-1)!.body)
      t.match(created, {
        kind: 'PRINCIPAL_CREATE',
        principalId: b.body.principalId,
        principalName: 'ops.team_2',
        detail: { disabled: true },
      })
    })

    t.test('naming rules: 400 invalid_name', async (t) => {
      const o = await api.newTenant()
      for (const name of ['', 'x'.repeat(65), '---', '. _', 'bad/name', 'émoji', 'tab\tname']) {
        const r = await api.post('/v1/principals', { name }, { bearer: o.apiKey })
        t.equal(r.status, 400, JSON.stringify(name))
        t.equal(r.body.code, 'invalid_name')
      }
      // NUL cannot be stored at all, so the body edge refuses it before any naming rule runs.
      const nul = await api.post('/v1/principals', { name: 'a\u0000b' }, { bearer: o.apiKey })
      t.equal(nul.status, 400, 'a name with NUL')
      t.equal(nul.body.code, 'invalid_request')
      for (const name of ['a', 'x'.repeat(64), 'A-b_c.d 9', '-1-']) {
        t.equal(
          (await api.post('/v1/principals', { name }, { bearer: o.apiKey })).status,
          201,
          JSON.stringify(name),
        )
      }
      t.equal((await api.post('/v1/principals', { name: 7 }, { bearer: o.apiKey })).status, 400)
      t.equal((await api.post('/v1/principals', {}, { bearer: o.apiKey })).status, 400, 'name is required')
    })

    t.test(
      'names are unique among live principals, case-insensitively; a tombstone frees its name',
      async (t) => {
        const o = await api.newTenant()
        const a = await api.post('/v1/principals', { name: 'Agent' }, { bearer: o.apiKey })
        const dup = await api.post('/v1/principals', { name: 'aGENT' }, { bearer: o.apiKey })
        t.equal(dup.status, 409)
        t.equal(dup.body.code, 'name_taken')
        const b = await api.post('/v1/principals', { name: 'other' }, { bearer: o.apiKey })
        const clash = await api.patch(
          `/v1/principals/${b.body.principalId}`,
          { name: 'AGENT' },
          { bearer: o.apiKey },
        )
        t.equal(clash.status, 409, 'rename onto a live name')
        const self = await api.patch(
          `/v1/principals/${a.body.principalId}`,
          { name: 'agent' },
          { bearer: o.apiKey },
        )
        t.equal(self.status, 200, 'a principal may change the case of its own name')
        t.equal(self.body.name, 'agent')
        t.equal((await api.delete(`/v1/principals/${a.body.principalId}`, { bearer: o.apiKey })).status, 200)
        const reuse = await api.post('/v1/principals', { name: 'Agent' }, { bearer: o.apiKey })
        t.equal(reuse.status, 201)
        const other = await api.newTenant()
        t.equal(
          (await api.post('/v1/principals', { name: 'Agent' }, { bearer: other.apiKey })).status,
          201,
          'names are per tenant',
        )
      },
    )

    t.test('patch: disable, enable, nothing to update, invalid values, not live', async (t) => {
      const o = await api.newTenant()
      const p = await api.post('/v1/principals', { name: 'worker' }, { bearer: o.apiKey })
      const id = p.body.principalId
      const off = await api.patch(`/v1/principals/${id}`, { disabled: true }, { bearer: o.apiKey })
      t.equal(off.status, 200)
      t.equal(off.body.disabled, true)
      const on = await api.patch(`/v1/principals/${id}`, { disabled: false }, { bearer: o.apiKey })
      t.equal(on.body.disabled, false)
      for (const body of [{}, undefined]) {
        const r = await api.patch(`/v1/principals/${id}`, body, { bearer: o.apiKey })
        t.equal(r.status, 400)
        t.equal(r.body.code, 'nothing_to_update')
      }
      for (const body of [{ disabled: 'yes' }, { name: 5 }, { other: 1 }]) {
        t.equal(
          (await api.patch(`/v1/principals/${id}`, body, { bearer: o.apiKey })).status,
          400,
          JSON.stringify(body),
        )
      }
      t.equal(
        (await api.patch(`/v1/principals/${id}`, { name: '!!' }, { bearer: o.apiKey })).body.code,
        'invalid_name',
      )
      const before = (await receiptsOf(o.tenantId)).length
      const same = await api.patch(
        `/v1/principals/${id}`,
        { name: 'worker', disabled: false },
        { bearer: o.apiKey },
      )
      t.equal(same.status, 200)
      t.equal((await receiptsOf(o.tenantId)).length, before, 'no receipt when nothing changes')
      const updates = (await receiptsOf(o.tenantId))
        .filter((r) => r.kind === 'PRINCIPAL_UPDATE')
        .map((r) => JSON.parse(r.body))
      t.equal(updates.length, 2)
      t.same(updates[0].detail.changes, { disabled: { from: false, to: true } })

      await api.delete(`/v1/principals/${id}`, { bearer: o.apiKey })
      t.equal(
        (await api.patch(`/v1/principals/${id}`, { disabled: true }, { bearer: o.apiKey })).status,
        404,
        'a tombstone cannot be patched',
      )
      t.equal(
        (await api.patch('/v1/principals/prn_missing', { disabled: true }, { bearer: o.apiKey })).status,
        404,
      )
    })

    t.test('a disabled principal cannot re-enable itself: its keys are dead', async (t) => {
      const o = await api.newTenant()
      const p = await api.post('/v1/principals', { name: 'self' }, { bearer: o.apiKey })
      const k = await api.post(
        '/v1/keys',
        { email: o.email, principal_id: p.body.principalId },
        { bearer: o.apiKey },
      )
      await api.patch(`/v1/principals/${p.body.principalId}`, { disabled: true }, { bearer: o.apiKey })
      const r = await api.patch(
        `/v1/principals/${p.body.principalId}`,
        { disabled: false },
        { bearer: k.body.apiKey },
      )
      t.equal(r.status, 401)
      t.same(r.body, { error: 'unknown API key', code: 'unknown_api_key' })
      const re = await api.patch(
        `/v1/principals/${p.body.principalId}`,
        { disabled: false },
        { bearer: o.apiKey },
      )
      t.equal(re.status, 200)
      t.equal((await api.get('/v1/me', { bearer: k.body.apiKey })).status, 200, 'enabling re-arms its keys')
    })

    t.test('revoke: every live key, one REVOKE receipt per key with the reason', async (t) => {
      const o = await api.newTenant()
      const p = await api.post('/v1/principals', { name: 'fleet' }, { bearer: o.apiKey })
      const keys = []
      for (let i = 0; i < 3; i++)
        keys.push(
          await api.post(
            '/v1/keys',
            { email: o.email, principal_id: p.body.principalId },
            { bearer: o.apiKey },
          ),
        )
      const r = await api.post(
        `/v1/principals/${p.body.principalId}/revoke`,
        { reason: 'rotating' },
        { bearer: o.apiKey },
      )
      t.equal(r.status, 200)
      t.equal(r.body.principalId, p.body.principalId)
      t.equal(r.body.revokedCount, 3)
      t.same(new Set(r.body.revokedKeys), new Set(keys.map((k) => k.body.keyId)))
      for (const k of keys) t.equal((await api.get('/v1/me', { bearer: k.body.apiKey })).status, 401)
      const revokes = (await receiptsOf(o.tenantId))
        .filter((x) => x.kind === 'REVOKE')
        .map((x) => JSON.parse(x.body))
      t.equal(revokes.length, 3)
      t.ok(
        revokes.every(
          (x) => x.decision === 'REVOKE' && x.reason === 'rotating' && x.principalName === 'fleet',
        ),
      )
      const got = await api.get(`/v1/principals/${p.body.principalId}`, { bearer: o.apiKey })
      t.match(
        got.body,
        { disabled: false, keyCount: 0, deletedAt: null },
        'the principal itself is unchanged',
      )
      const again = await api.post(`/v1/principals/${p.body.principalId}/revoke`, undefined, {
        bearer: o.apiKey,
      })
      t.same(again.body, { principalId: p.body.principalId, revokedCount: 0, revokedKeys: [] })
      t.equal((await api.post('/v1/principals/prn_missing/revoke', {}, { bearer: o.apiKey })).status, 404)
      t.equal(
        (await api.post(`/v1/principals/${p.body.principalId}/revoke`, { reason: 3 }, { bearer: o.apiKey }))
          .status,
        400,
      )
    })

    t.test(
      'delete tombstones: keys revoked, PRINCIPAL_DELETE, stays resolvable, second delete 404',
      async (t) => {
        const o = await api.newTenant()
        const p = await api.post('/v1/principals', { name: 'temp' }, { bearer: o.apiKey })
        const k = await api.post(
          '/v1/keys',
          { email: o.email, principal_id: p.body.principalId },
          { bearer: o.apiKey },
        )
        const d = await api.delete(`/v1/principals/${p.body.principalId}`, { bearer: o.apiKey })
        t.equal(d.status, 200)
        t.type(d.body.deletedAt, 'number')
        t.equal((await api.get('/v1/me', { bearer: k.body.apiKey })).status, 401)
        const got = await api.get(`/v1/principals/${p.body.principalId}`, { bearer: o.apiKey })
        t.equal(got.status, 200, 'tombstones stay resolvable by id')
        t.equal(got.body.deletedAt, d.body.deletedAt)
        t.equal((await api.delete(`/v1/principals/${p.body.principalId}`, { bearer: o.apiKey })).status, 404)
        const live = await api.get('/v1/principals', { bearer: o.apiKey })
        t.notOk(
          live.body.principals.some((x: { principalId: string }) => x.principalId === p.body.principalId),
        )
        const all = await api.get('/v1/principals?include_deleted=1', { bearer: o.apiKey })
        t.ok(all.body.principals.some((x: { principalId: string }) => x.principalId === p.body.principalId))
        const kinds = (await receiptsOf(o.tenantId)).map((r) => r.kind)
        t.same(
          kinds.slice(-2),
          ['REVOKE', 'PRINCIPAL_DELETE'],
          'keys are revoked, then the delete is recorded',
        )
      },
    )

    t.test("another tenant's principal is exactly a missing one", async (t) => {
      const a = await api.newTenant()
      const b = await api.newTenant()
      const p = await api.post('/v1/principals', { name: 'secret' }, { bearer: b.apiKey })
      const id = p.body.principalId
      for (const [label, call] of [
        ['get', () => api.get(`/v1/principals/${id}`, { bearer: a.apiKey })],
        ['patch', () => api.patch(`/v1/principals/${id}`, { disabled: true }, { bearer: a.apiKey })],
        ['revoke', () => api.post(`/v1/principals/${id}/revoke`, {}, { bearer: a.apiKey })],
        ['delete', () => api.delete(`/v1/principals/${id}`, { bearer: a.apiKey })],
      ] as const) {
        const foreign = await call()
        t.equal(foreign.status, 404, label)
        t.same(foreign.body, { error: 'principal not found', code: 'principal_not_found' }, label)
      }
      t.equal(
        (await api.get(`/v1/principals/${id}`, { bearer: b.apiKey })).body.disabled,
        false,
        'nothing changed',
      )
    })

    t.test('concurrent creates of one name: exactly one wins', async (t) => {
      const o = await api.newTenant()
      const results = await Promise.all(
        Array.from({ length: 8 }, () => api.post('/v1/principals', { name: 'racer' }, { bearer: o.apiKey })),
      )
      t.same(results.map((r) => r.status).sort(), [201, 409, 409, 409, 409, 409, 409, 409])
    })
  })
}
