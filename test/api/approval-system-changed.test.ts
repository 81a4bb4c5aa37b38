import { generate } from 'otplib'
import t, { type Test } from 'tap'
import type { ManualClock } from '../../src/core/clock.js'
import type { Storage } from '../../src/store/ports/storage.js'
import { createFakeStorage } from '../fakes/fake-storage.js'
import { startWithTenantSystems, type TestStorageKind } from '../helpers/control-plane.js'
import { billingSystems, startRecordingServer } from '../helpers/enrolled-systems.js'

/**
 * Found in review: an admin could re-point a system (another upstream, another method for the
 * tool) between an action's staging and its approval; the approver was shown the same action,
 * and the TOTP approval sent the write, with the injected credential, where it now pointed.
 */
/**
 * A tenant with the billing system on a recording upstream and an agent key; `stage` stages the
 * refund tool call for approval, `approve` approves an action with the authenticator's code of
 * the moment, and `definition` is the system as enrolled (for a PUT that changes it).
 */
async function setup(t: Test, kind: TestStorageKind, storage?: Storage) {
  const original = await startRecordingServer(t)
  const s = await startWithTenantSystems(
    t,
    kind,
    (tenantId) => billingSystems(tenantId, original.origin),
    storage ? { storage } : {},
  )
  const { api, tenant } = s
  const clock = s.clock as ManualClock
  const admin = tenant.apiKey
  const agent = (await api.post('/v1/keys', { email: tenant.email, scope: 'agent' }, { bearer: admin })).body
    .apiKey as string
  const current = (await api.get('/v1/systems/sys_billing', { bearer: admin })).body as Record<
    string,
    unknown
  >
  const { systemId: _s, version: _v, createdAt: _c, updatedAt: _u, tenantId: _t, ...definition } = current
  const stage = async () =>
    (
      await api.post(
        '/v1/check',
        {
          verb: 'refund',
          target: 'ch_1',
          tool: { name: 'issue_refund', params: { charge: 'ch_1', amount: 500 } },
        },
        { bearer: agent },
      )
    ).body.actionId as string
  const approve = async (actionId: string) =>
    api.post(
      `/v1/agent/actions/${actionId}/approve`,
      { totpCode: await generate({ secret: tenant.totp.secret, epoch: Math.floor(clock.nowMs() / 1000) }) },
      { bearer: admin },
    )
  /** PUTs the system as `change` makes it from the enrolled definition. */
  const replace = async (change: (d: Record<string, unknown>) => Record<string, unknown>) =>
    (await api.put('/v1/systems/sys_billing', change(definition), { bearer: admin })).status
  return { s, api, admin, clock, original, definition, stage, approve, replace }
}

const BACKENDS = ['fake', 'postgres'] as const

for (const kind of BACKENDS)
  t.test(`an action whose system changed after staging is not approved (${kind})`, async (t) => {
    const { s, clock, original, stage, approve, replace } = await setup(t, kind)
    const other = await startRecordingServer(t)
    const repoint = async (upstream: string, method: string, pathTemplate: string) => {
      // Without the operator's credential, which holds only for the upstream its file names
      // (test/api/credential-isolation.test.ts).
      const status = await replace(({ credential: _operators, ...d }) => ({
        ...d,
        upstream,
        tools: (d.tools as Record<string, unknown>[]).map((x) =>
          x.name === 'issue_refund' ? { ...x, method, pathTemplate } : x,
        ),
      }))
      t.equal(status, 200, 're-pointed')
    }

    // Changed within the second it was staged in: told apart by the version it was staged under.
    const actionId = await stage()
    t.ok(actionId, 'staged')
    await repoint(other.origin, 'DELETE', '/v1/customers/{charge}')
    const refused = await approve(actionId)
    t.same([refused.status, refused.body.code], [409, 'action_system_changed'])
    t.same([original.requests.length, other.requests.length], [0, 0], 'nothing was sent anywhere')

    // Staged again under the system as it is now, it is approved and goes where it now points.
    clock.advance(31_000)
    const again = await stage()
    const done = await approve(again)
    t.equal(done.status, 200, JSON.stringify(done.body).slice(0, 200))
    t.same(
      other.requests.map((r) => [r.method, r.url]),
      [['DELETE', '/v1/customers/ch_1']],
    )

    // An action stored before versions were kept (no version) is judged by time.
    if (kind === 'postgres') {
      clock.advance(31_000)
      const legacy = await stage()
      await s.db!.db.sql`update pending_actions set system_version = null where id = ${legacy}`
      clock.advance(5_000)
      await repoint(original.origin, 'POST', '/v1/refunds')
      const old = await approve(legacy)
      t.same([old.status, old.body.code], [409, 'action_system_changed'], 'a legacy action, by time')
      t.equal(original.requests.length, 0)
    }
  })

/**
 * Found in review of the version pinning: the approval checked the version, then read the
 * system again to plan the request and once more to send it. A change landing in between (while
 * the code is checked, say) sent the staged request where the system now pointed, with its
 * credential. The version checked is now the version written to.
 */
t.test('a system changed while its action is being approved is refused, not written to', async (t) => {
  const storage = createFakeStorage()
  const { api, admin, original, stage, approve, replace } = await setup(t, 'fake', storage)
  const other = await startRecordingServer(t)
  const actionId = await stage()
  t.ok(actionId, 'staged')
  // The admin's change lands while the approval reads the tenant's TOTP secret (after the version check).
  const totp = storage.sor.stores.totp
  const secret = totp.secret.bind(totp)
  let change: (() => Promise<void>) | null = async () => {
    t.equal(
      await replace((d) => ({ ...d, upstream: other.origin })),
      200,
      're-pointed while the approval is under way',
    )
  }
  totp.secret = async (...args: Parameters<typeof secret>) => {
    const c = change
    change = null
    if (c) await c()
    return secret(...args)
  }
  const approved = await approve(actionId)
  t.equal(change, null, 'the change landed during the approval')
  t.same([approved.status, approved.body.code], [409, 'action_system_changed'])
  t.same([original.requests.length, other.requests.length], [0, 0], 'nothing was sent anywhere')
  const pending = (await api.get('/v1/agent/actions', { bearer: admin })).body.actions as {
    actionId: string
  }[]
  t.ok(
    pending.some((a) => a.actionId === actionId),
    'still pending (to be dismissed), its code not used up',
  )
})

/** Found in the same review: the undo was planned from the system as it was after the write. */
t.test('no undo is staged from another version of the system than the write went to', async (t) => {
  const { clock, original, stage, approve, replace } = await setup(t, 'fake')
  let changeDuringWrite = false
  original.respond(async (_q, res) => {
    if (changeDuringWrite) {
      const status = await replace((d) => ({
        ...d,
        // First: after the catch-all POST /v1/* it would never decide, and is refused.
        routes: [{ method: 'POST', path: '/v1/other', verb: 'verify' }, ...(d.routes as unknown[])],
      }))
      t.equal(status, 200, 'changed while the write was answered')
    }
    res.writeHead(201, { 'content-type': 'application/json' }).end('{"id":"re_1"}')
  })

  const unchanged = await approve(await stage())
  t.match(unchanged.body, { type: 'executed', revertActionId: /^act_/ }, 'an undo, the system unchanged')

  clock.advance(31_000)
  changeDuringWrite = true
  const changed = await approve(await stage())
  t.match(changed.body, {
    type: 'executed',
    revertActionId: null,
    revertMessage: /sys_billing changed since the write/,
  })
  t.equal(original.requests.length, 2, 'both writes went out')
})
