import t from 'tap'
import type { Storage } from '../../src/store/ports/storage.js'
import { createFakeStorage } from '../fakes/fake-storage.js'
import { startWithTenantSystems } from '../helpers/control-plane.js'
import { billingSystems, startRecordingServer } from '../helpers/enrolled-systems.js'

/**
 * Found in review: /v1/execute read the system before its standing check and its consume
 * transaction, and nothing read it again. A DELETE answered in between let the write reach the
 * deleted system's upstream with the injected credential, its authorising receipt after the
 * SYSTEM_DELETE. The storage here runs the DELETE just before the next transaction begins: the
 * one that would authorise the write.
 */
t.test('a system deleted after an execute was prepared is not written to', async (t) => {
  const upstream = await startRecordingServer(t)
  const fake = createFakeStorage()
  let beforeNextTransaction: (() => Promise<void>) | null = null
  const storage: Storage = {
    ...fake,
    sor: {
      ...fake.sor,
      async transaction(fn) {
        const hook = beforeNextTransaction
        beforeNextTransaction = null
        if (hook) await hook()
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
  let deleted = 0
  beforeNextTransaction = async () => {
    deleted = (await api.delete('/v1/systems/sys_billing', bearer)).status
  }
  const executed = await api.post('/v1/execute', { ...request, leaseId: check.body.leaseId }, bearer)
  t.equal(deleted, 200, 'the system was deleted while the write was under way')
  t.same([executed.status, executed.body.code], [400, 'unknown_system'])
  t.equal(upstream.requests.length, 0, 'nothing reached the deleted system')
})
