import { randomBytes } from 'node:crypto'
import { generate } from 'otplib'
import t from 'tap'
import type { ManualClock } from '../../src/core/clock.js'
import { deriveKeyring } from '../../src/security/keyring.js'
import { createFakeStorage } from '../fakes/fake-storage.js'
import { startControlPlane, startWithTenantSystems, storedReceipts } from '../helpers/control-plane.js'
import { billingSystems, startRecordingServer } from '../helpers/enrolled-systems.js'
import { capturingLogger, LOG_LEVEL } from '../helpers/proxy.js'

// Found in review: a control plane whose master key did not seal the tenant's authenticator
// secret (another key file, a regenerated <dataDir>/master.key) answered every TOTP approval
// 500 internal_error, with "Unsupported state or unable to authenticate data" and a stack in the
// log. Start-up now refuses such a key (test/cli/master-key-refusal.test.ts); a tenant sealed
// under another key than the rest is still possible, and gets a stable answer.
t.test('an authenticator sealed under another master key: 503 totp_unreadable, not 500', async (t) => {
  const storage = createFakeStorage()
  const upstream = await startRecordingServer(t)
  const first = await startWithTenantSystems(
    t,
    'fake',
    (tenantId) => billingSystems(tenantId, upstream.origin),
    { storage },
  )
  const { tenant } = first
  const clock = first.clock as ManualClock
  const agentKey = await first.api.post(
    '/v1/keys',
    { email: tenant.email, scope: 'agent' },
    { bearer: tenant.apiKey },
  )
  const staged = await first.api.post(
    '/v1/check',
    {
      verb: 'refund',
      target: 'ch_1',
      tool: { name: 'issue_refund', params: { charge: 'ch_1', amount: 500 } },
    },
    { bearer: agentKey.body.apiKey as string },
  )
  const actionId = staged.body.actionId as string
  t.ok(actionId, 'staged for step-up')
  await first.cp.close()

  // The same data, served under another master key.
  const { logger, lines } = capturingLogger()
  const second = await startControlPlane(t, 'fake', {
    storage,
    clock,
    keyring: deriveKeyring(randomBytes(32)),
    systems: billingSystems(tenant.tenantId, upstream.origin),
    logger,
  })
  const approve = (totpCode: string) =>
    second.api.post(`/v1/agent/actions/${actionId}/approve`, { totpCode }, { bearer: tenant.apiKey })
  const seconds = () => Math.floor(clock.nowMs() / 1000)
  for (const code of [await generate({ secret: tenant.totp.secret, epoch: seconds() }), '000000']) {
    const r = await approve(code)
    t.equal(r.status, 503, code)
    t.equal(r.body.code, 'totp_unreadable')
    t.match(r.body.error, /cannot be read with this master key/)
  }
  t.notOk(
    lines.some((l) => l.level >= LOG_LEVEL.error || JSON.stringify(l).includes('"stack"')),
    'no error and no stack in the log',
  )
  const warned = lines.filter((l) => l.level === LOG_LEVEL.warn && /step-up/.test(String(l.msg)))
  t.equal(warned.length, 2, 'one warning per refused code')
  t.match(warned[0], { tenantId: tenant.tenantId })
  t.notOk(JSON.stringify(warned[0]).includes('"stack"'), 'without a stack')
  t.equal(upstream.requests.length, 0, 'nothing was sent')
  t.equal(
    await storage.sor.stores.totp.countCodeTried(tenant.tenantId, seconds(), 100, 0),
    1,
    'the codes were not counted as wrong (this count is the first)',
  )
  t.notOk(
    (await storedReceipts(second.cp, tenant.tenantId)).some((r) => r.kind === 'APPROVAL_FAILED'),
    'not on record as a wrong code: none was checked',
  )

  // A backup code is hashed, not sealed: it still approves.
  const backup = await approve(tenant.totp.backupCodes[0] as string)
  t.equal(backup.status, 200, JSON.stringify(backup.body))

  // The way out the answer names: re-enrolment seals a new secret under this key.
  const reEnrolled = await second.api.post('/v1/sponsor/totp', {}, { bearer: tenant.sponsorToken })
  t.equal(reEnrolled.status, 200, JSON.stringify(reEnrolled.body))
})
