import t from 'tap'
import { startWithTenantSystems } from '../helpers/control-plane.js'
import {
  billingSystems,
  CREDENTIAL_ENV,
  CREDENTIAL_SECRET,
  startRecordingServer,
} from '../helpers/enrolled-systems.js'

/**
 * The operator's systems file names a credential for one tenant. Another tenant's admin (anyone
 * can open a tenant) who enrols a system of its own naming the same variable must not have
 * writegate send that secret to its upstream.
 */
t.test("a tenant cannot have another tenant's operator credential injected", async (t) => {
  const victimUpstream = await startRecordingServer(t)
  const attackerUpstream = await startRecordingServer(t)
  const s = await startWithTenantSystems(t, 'fake', (tenantId) =>
    billingSystems(tenantId, victimUpstream.origin),
  )
  const attacker = await s.api.newTenant()
  t.not(attacker.tenantId, s.tenant.tenantId)
  const enrolled = await s.api.post(
    '/v1/systems',
    {
      systemId: 'sys_steal',
      upstream: attackerUpstream.origin,
      credential: { header: 'x-stolen', prefix: '', fromEnv: CREDENTIAL_ENV },
      routes: [{ method: 'POST', path: '/v1/*', verb: 'verify' }],
    },
    { bearer: attacker.apiKey },
  )
  t.equal(enrolled.status, 201, 'a reference is only a name: enrolled')
  const checked = await s.api.post(
    '/v1/check',
    { verb: 'verify', request: { systemId: 'sys_steal', method: 'POST', path: '/v1/x' } },
    { bearer: attacker.apiKey },
  )
  t.equal(checked.body.decision, 'ALLOW')
  const executed = await s.api.post(
    '/v1/execute',
    { systemId: 'sys_steal', method: 'POST', path: '/v1/x', leaseId: checked.body.leaseId },
    { bearer: attacker.apiKey },
  )
  // Failed closed as every execute does: 200 with ok false and the EXECUTE receipt's reason.
  t.equal(executed.status, 200)
  t.match(
    executed.body,
    { ok: false, reason: 'credential_unavailable', upstreamCalled: false },
    "refused: the credential is not this tenant's to use",
  )
  t.notMatch(JSON.stringify(executed.body), CREDENTIAL_SECRET, 'the answer does not carry it either')
  t.same(attackerUpstream.requests, [], "the attacker's upstream received nothing")

  // The tenant the file enrols the system for still has its credential injected.
  const own = await s.api.post(
    '/v1/check',
    { verb: 'verify', request: { systemId: 'sys_billing', method: 'POST', path: '/v1/verify' } },
    { bearer: s.tenant.apiKey },
  )
  const sent = await s.api.post(
    '/v1/execute',
    { systemId: 'sys_billing', method: 'POST', path: '/v1/verify', leaseId: own.body.leaseId },
    { bearer: s.tenant.apiKey },
  )
  t.equal(sent.status, 200, JSON.stringify(sent.body))
  t.equal(victimUpstream.requests.at(-1)?.headers.authorization, `Bearer ${CREDENTIAL_SECRET}`)
})

/**
 * The same tenant's admin may use the operator's credential through the systems the operator
 * enrolled, but not send it elsewhere: the secret is the operator's to place (found in review).
 */
t.test("a tenant admin cannot point the operator's credential at an upstream of its own", async (t) => {
  const operatorUpstream = await startRecordingServer(t)
  const ownUpstream = await startRecordingServer(t)
  const s = await startWithTenantSystems(t, 'fake', (tenantId) =>
    billingSystems(tenantId, operatorUpstream.origin),
  )
  const enrolled = await s.api.post(
    '/v1/systems',
    {
      systemId: 'sys_mine',
      upstream: ownUpstream.origin,
      credential: { header: 'authorization', prefix: 'Bearer ', fromEnv: CREDENTIAL_ENV },
      routes: [{ method: 'POST', path: '/v1/*', verb: 'verify' }],
    },
    { bearer: s.tenant.apiKey },
  )
  t.equal(enrolled.status, 201)
  const checked = await s.api.post(
    '/v1/check',
    { verb: 'verify', request: { systemId: 'sys_mine', method: 'POST', path: '/v1/x' } },
    { bearer: s.tenant.apiKey },
  )
  const executed = await s.api.post(
    '/v1/execute',
    { systemId: 'sys_mine', method: 'POST', path: '/v1/x', leaseId: checked.body.leaseId },
    { bearer: s.tenant.apiKey },
  )
  t.match(executed.body, { ok: false, reason: 'credential_unavailable', upstreamCalled: false })
  t.same(ownUpstream.requests, [], 'its own upstream received nothing')
  const own = await s.api.post(
    '/v1/check',
    { verb: 'verify', request: { systemId: 'sys_billing', method: 'POST', path: '/v1/verify' } },
    { bearer: s.tenant.apiKey },
  )
  await s.api.post(
    '/v1/execute',
    { systemId: 'sys_billing', method: 'POST', path: '/v1/verify', leaseId: own.body.leaseId },
    { bearer: s.tenant.apiKey },
  )
  t.equal(
    operatorUpstream.requests.at(-1)?.headers.authorization,
    `Bearer ${CREDENTIAL_SECRET}`,
    "the operator's system still has it injected",
  )
})
