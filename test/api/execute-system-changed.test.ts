import t, { type Test } from 'tap'
import type { Storage } from '../../src/store/ports/storage.js'
import { createFakeStorage } from '../fakes/fake-storage.js'
import { startWithTenantSystems } from '../helpers/control-plane.js'
import { billingSystems, startRecordingServer } from '../helpers/enrolled-systems.js'

/**
 * Found in review: /v1/execute read the system before its standing check and its consume
 * transaction, and nothing read it again. A DELETE or a PUT answered in between let the write
 * reach the old upstream with the injected credential, its authorising receipt after the change.
 * The storage here runs the change just before the next transaction begins: the one that would
 * authorise the write.
 */
async function setup(t: Test) {
  const upstream = await startRecordingServer(t)
  const other = await startRecordingServer(t)
  const fake = createFakeStorage()
  const hook: { beforeNextTransaction: (() => Promise<void>) | null } = { beforeNextTransaction: null }
  const storage: Storage = {
    ...fake,
    sor: {
      ...fake.sor,
      async transaction(fn) {
        const run = hook.beforeNextTransaction
        hook.beforeNextTransaction = null
        if (run) await run()
        return fake.sor.transaction(fn)
      },
    },
  }
  const { api, tenant } = await startWithTenantSystems(
    t,
    'fake',
    (tenantId) => billingSystems(tenantId, upstream.origin),
    { storage },
  )
  const bearer = { bearer: tenant.apiKey }
  const request = { systemId: 'sys_billing', method: 'POST', path: '/v1/refunds', body: { charge: 'ch_1' } }
  const check = await api.post('/v1/check', { verb: 'verify', target: 'ch_1', request }, bearer)
  t.ok(check.body.leaseId, 'an ALLOW with a lease')
  const execute = () => api.post('/v1/execute', { ...request, leaseId: check.body.leaseId }, bearer)
  return { api, bearer, upstream, other, hook, execute }
}

t.test('a system deleted after an execute was prepared is not written to', async (t) => {
  const { api, bearer, upstream, hook, execute } = await setup(t)
  let deleted = 0
  hook.beforeNextTransaction = async () => {
    deleted = (await api.delete('/v1/systems/sys_billing', bearer)).status
  }
  const executed = await execute()
  t.equal(deleted, 200, 'the system was deleted while the write was under way')
  t.same([executed.status, executed.body.code], [400, 'unknown_system'])
  t.equal(upstream.requests.length, 0, 'nothing reached the deleted system')
})

t.test(
  'a system re-pointed after an execute was prepared is not written to, at either upstream',
  async (t) => {
    const { api, bearer, upstream, other, hook, execute } = await setup(t)
    const current = (await api.get('/v1/systems/sys_billing', bearer)).body as Record<string, unknown>
    const {
      systemId: _s,
      version: _v,
      createdAt: _c,
      updatedAt: _u,
      tenantId: _t,
      credential: _cr,
      ...definition
    } = current
    let replaced = 0
    hook.beforeNextTransaction = async () => {
      replaced = (await api.put('/v1/systems/sys_billing', { ...definition, upstream: other.origin }, bearer))
        .status
    }
    const executed = await execute()
    t.equal(replaced, 200, 'moved to another upstream, without the credential, while the write was under way')
    t.same([executed.status, executed.body.code], [409, 'system_changed'])
    t.equal(upstream.requests.length, 0, 'the old upstream got nothing')
    t.equal(other.requests.length, 0, 'nor the new one')
    const again = await execute()
    t.equal(again.status, 200, 'the lease was kept: executed again, it goes where the system now points')
    t.equal(other.requests.length, 1)
  },
)
