import t from 'tap'
import { ManualClock } from '../../src/core/clock.js'
import type { TenantSnapshot } from '../../src/core/snapshot.js'
import { createGate } from '../../src/gate/gate.js'
import { silentGateEvents } from '../../src/gate/gate-events.js'
import { createSnapshotCache } from '../../src/gate/snapshot-cache.js'
import { createMemoryHotStore } from '../../src/store/memory/hot-store.js'
import type { HotStore } from '../../src/store/ports/hot-store.js'

function snapshot(version: number, over: Partial<TenantSnapshot> = {}): TenantSnapshot {
  return {
    tenantId: 'ten_a',
    version,
    builtAt: 0,
    policies: {
      tenant: { policy: { verify: 'allow' }, version: 1, updatedAt: 1 },
      environments: {},
      principals: {},
    },
    verbs: [],
    principals: { prn_a: { name: 'a', disabled: false, deleted: false } },
    keys: { key_a: { principalId: 'prn_a', revoked: false, scope: 'agent' } },
    roster: { all: false, principals: [], keys: [] },
    grants: [],
    systems: [],
    ...over,
  }
}

/** A hot store whose pub/sub never fires: as if invalidations were lost. */
function deaf(hot: HotStore): HotStore {
  return { ...hot, subscribe: () => () => {} }
}

const req = {
  tenantId: 'ten_a',
  keyId: 'key_a',
  verb: 'verify',
  target: null,
  environment: null,
  grantId: null,
  chargeQuota: true,
}

t.test(
  'with invalidations lost, the commit still refuses a stale snapshot and the gate re-decides',
  async (t) => {
    const clock = new ManualClock(Date.UTC(2026, 10, 21))
    const inner = createMemoryHotStore()
    const hot = deaf(inner)
    const snapshots = createSnapshotCache({ hot, nowMs: () => clock.nowMs() })
    const retries: string[] = []
    const gate = createGate({
      hot,
      snapshots,
      clock,
      quotaLimit: 100,
      events: { ...silentGateEvents, commitRetried: (e) => retries.push(e.tenantId) },
    })
    await inner.publish(snapshot(1))
    t.match(await gate.decide(req), { kind: 'decided', outcome: { decision: 'ALLOW', policyVersion: 1 } })
    await inner.publish(snapshot(2, { roster: { all: true, principals: [], keys: [] } }))
    t.match(
      await gate.decide(req),
      { kind: 'decided', outcome: { decision: 'DENY', reason: 'sponsor_revoked_tenant', policyVersion: 2 } },
      'decided under v2, not the cached v1',
    )
    t.same(retries, ['ten_a'], 'one stale commit, then a refresh')
    t.equal(await inner.used('ten_a', 'key_a', '2026-11'), 2, 'the stale attempt was not counted')
  },
)

t.test(
  'a hot store moved back (replaced after a database restore) is followed, not failed closed for ever',
  async (t) => {
    const clock = new ManualClock(Date.UTC(2026, 10, 21))
    for (const [name, hot] of [
      ['invalidations lost', deaf(createMemoryHotStore())],
      ['invalidations heard', createMemoryHotStore()],
    ] as const) {
      const snapshots = createSnapshotCache({ hot, nowMs: () => clock.nowMs() })
      const gate = createGate({ hot, snapshots, clock, quotaLimit: 100, events: silentGateEvents })
      await hot.publish(snapshot(91))
      t.match(await gate.decide(req), { kind: 'decided', outcome: { decision: 'ALLOW', policyVersion: 91 } })
      // The restored database's kill switch, at a version below the one cached.
      await hot.publish(snapshot(89, { roster: { all: true, principals: [], keys: [] } }), 91)
      t.match(
        await gate.decide(req),
        {
          kind: 'decided',
          outcome: { decision: 'DENY', reason: 'sponsor_revoked_tenant', policyVersion: 89 },
        },
        name,
      )
    }
  },
)

t.test('standing: barred keys, good standing, and fail-closed without a snapshot', async (t) => {
  const clock = new ManualClock(Date.UTC(2026, 10, 21))
  const hot = createMemoryHotStore()
  const snapshots = createSnapshotCache({ hot, nowMs: () => clock.nowMs() })
  const gate = createGate({ hot, snapshots, clock, quotaLimit: 100, events: silentGateEvents })
  t.same(await gate.standing('ten_a', 'key_a'), { kind: 'unavailable', reason: 'no_snapshot' })
  t.same(await gate.decide(req), { kind: 'unavailable', reason: 'no_snapshot' })
  await hot.publish(snapshot(1))
  t.same(await gate.standing('ten_a', 'key_a'), { kind: 'in_good_standing', policyVersion: 1 })
  await hot.publish(snapshot(2, { keys: { key_a: { principalId: 'prn_a', revoked: true, scope: 'agent' } } }))
  t.same(await gate.standing('ten_a', 'key_a'), { kind: 'barred', reason: 'key_revoked', policyVersion: 2 })
  t.equal(await hot.used('ten_a', 'key_a', '2026-11'), 0, 'standing never charges quota')
})

t.test('a hot store that throws fails closed', async (t) => {
  const clock = new ManualClock(Date.UTC(2026, 10, 21))
  const inner = createMemoryHotStore()
  await inner.publish(snapshot(1))
  const broken: HotStore = { ...inner, commit: async () => Promise.reject(new Error('ECONNREFUSED')) }
  const failures: string[] = []
  const gate = createGate({
    hot: broken,
    snapshots: createSnapshotCache({ hot: broken, nowMs: () => clock.nowMs() }),
    clock,
    quotaLimit: 100,
    events: { ...silentGateEvents, failedClosed: (e) => failures.push(e.reason) },
  })
  t.same(await gate.decide(req), { kind: 'unavailable', reason: 'store_unreachable' })
  t.same(failures, ['store_unreachable'])
})

t.test('a prediction is reused only under the snapshot and the second it was made in', async (t) => {
  const clock = new ManualClock(Date.UTC(2026, 10, 21))
  const inner = createMemoryHotStore()
  const hot = deaf(inner)
  const gate = createGate({
    hot,
    snapshots: createSnapshotCache({ hot, nowMs: () => clock.nowMs() }),
    clock,
    quotaLimit: 100,
    events: silentGateEvents,
  })
  await inner.publish(snapshot(1))
  const real = await gate.predict(req)
  t.match(real, { evaluation: { kind: 'decided', outcome: { decision: 'ALLOW', policyVersion: 1 } } })
  if (real?.evaluation?.kind !== 'decided') return
  // A marked evaluation: the decision shows whether decide() reused it or evaluated afresh.
  const marked = {
    ...real,
    evaluation: {
      kind: 'decided' as const,
      outcome: { ...real.evaluation.outcome, decision: 'DENY' as const, reason: 'policy_deny' as const },
    },
  }
  t.match(await gate.decide(req, marked), { kind: 'decided', outcome: { decision: 'DENY' } }, 'reused')
  t.match(
    await gate.decide({ ...req }, marked),
    { kind: 'decided', outcome: { decision: 'ALLOW' } },
    'not for another request object, even an equal one',
  )
  clock.advance(1000)
  t.match(
    await gate.decide(req, marked),
    { kind: 'decided', outcome: { decision: 'ALLOW' } },
    'a second later it is evaluated again (grants expire by the second)',
  )
  const again = { ...marked, now: Math.floor(clock.nowMs() / 1000) }
  await inner.publish(
    snapshot(2, {
      policies: { ...snapshot(2).policies, tenant: { policy: { verify: 'deny' }, version: 2, updatedAt: 2 } },
    }),
  )
  t.match(
    await gate.decide(req, { ...again, evaluation: real.evaluation }),
    { kind: 'decided', outcome: { decision: 'DENY', reason: 'policy_deny', policyVersion: 2 } },
    'made under v1, the commit finds v2: decided again under v2, not by the prediction',
  )
})
