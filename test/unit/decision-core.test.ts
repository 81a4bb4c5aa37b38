import fc from 'fast-check'
import t from 'tap'
import { evaluate, mayAttempt, settleGrant, standingOf, standingSince } from '../../src/core/evaluate.js'
import {
  checkPolicyBody,
  foldLayers,
  mergePolicy,
  type PolicyLayer,
  principalStack,
  resolveMode,
} from '../../src/core/policy-layers.js'
import { CompiledSnapshot, type TenantSnapshot } from '../../src/core/snapshot.js'
import { BUILTIN_VERBS, type CustomVerb, MODES, type Mode, Vocabulary } from '../../src/core/verbs.js'
import { emptySnapshot } from '../helpers/snapshots.js'

const mode = fc.constantFrom(...MODES)
const customName = fc.stringMatching(/^[a-z][a-z0-9_]{0,6}\.[a-z][a-z0-9_]{0,6}$/)
const liveVerb = (name: string): CustomVerb => ({
  name,
  description: '',
  status: 'live',
  aliasOf: null,
  createdAt: 1,
  deprecatedAt: null,
})

const vocabArb = fc
  .uniqueArray(customName, { maxLength: 8 })
  .map((names) => new Vocabulary(names.map(liveVerb)))
const layerArb = (vocab: Vocabulary) =>
  fc
    .dictionary(fc.constantFrom(...vocab.liveVerbs()), mode)
    .map((policy): PolicyLayer => ({ policy, version: 1, updatedAt: 1 }))

t.test('layer precedence: principal over environment over tenant over the default', async (t) => {
  fc.assert(
    fc.property(
      vocabArb.chain((vocab) =>
        fc.tuple(
          fc.constant(vocab),
          layerArb(vocab),
          fc.option(layerArb(vocab), { nil: undefined }),
          fc.option(layerArb(vocab), { nil: undefined }),
        ),
      ),
      ([vocab, tenant, environment, principal]) => {
        const { effectivePolicy, policyProvenance } = foldLayers(vocab, { tenant, environment, principal })
        for (const verb of vocab.liveVerbs()) {
          const expected =
            principal?.policy[verb] !== undefined
              ? [principal.policy[verb], 'principal']
              : environment?.policy[verb] !== undefined
                ? [environment.policy[verb], 'environment']
                : tenant.policy[verb] !== undefined
                  ? [tenant.policy[verb], 'tenant']
                  : [vocab.defaultMode(verb), 'tenant']
          if (effectivePolicy[verb] !== expected[0] || policyProvenance[verb] !== expected[1]) return false
        }
        return Object.keys(effectivePolicy).length === vocab.liveVerbs().length
      },
    ),
  )
  t.pass('holds')
})

t.test('defaults: built-ins as documented, custom verbs deny', async (t) => {
  const vocab = new Vocabulary([liveVerb('billing.refund')])
  const { effectivePolicy } = foldLayers(vocab, { tenant: { policy: {}, version: 0, updatedAt: null } })
  t.same(effectivePolicy, { ...BUILTIN_VERBS, 'billing.refund': 'deny' })
  t.same(BUILTIN_VERBS, {
    admit: 'step_up',
    prescribe: 'step_up',
    provision: 'require_grant',
    refund: 'step_up',
    verify: 'allow',
    verify_human: 'allow',
  })
})

t.test('inherit removes exactly one verb and leaves every other verb as it was', async (t) => {
  fc.assert(
    fc.property(
      vocabArb.chain((vocab) =>
        fc.tuple(
          fc.constant(vocab),
          layerArb(vocab).filter((l) => Object.keys(l.policy).length > 0),
        ),
      ),
      fc.nat(),
      ([vocab, layer], pick) => {
        const verbs = Object.keys(layer.policy)
        const target = verbs[pick % verbs.length] as string
        const check = checkPolicyBody(vocab, { [target]: 'inherit' }, 'principal')
        if (!check.ok) return false
        const next = mergePolicy(layer.policy, check.entries)
        const { [target]: _, ...rest } = layer.policy
        return (
          !(target in next) &&
          JSON.stringify(Object.entries(next).sort()) === JSON.stringify(Object.entries(rest).sort())
        )
      },
    ),
  )
  t.same(
    checkPolicyBody(new Vocabulary([]), { refund: 'inherit' }, 'tenant'),
    { ok: false, problem: { code: 'unknown_mode', verbs: ['refund'], modes: ['inherit'] } },
    'inherit is for principal overrides only',
  )
})

t.test('aliases resolve to their live verb, through chains, case-insensitively', async (t) => {
  fc.assert(
    fc.property(fc.uniqueArray(customName, { minLength: 2, maxLength: 6 }), (names) => {
      // names[0] renamed to names[1], then to names[2], ...: every old name is an alias of the next.
      const verbs: CustomVerb[] = names.map((name, i) =>
        i < names.length - 1
          ? { ...liveVerb(name), status: 'deprecated', aliasOf: names[i + 1] as string, deprecatedAt: 2 }
          : liveVerb(name),
      )
      const vocab = new Vocabulary(verbs)
      const live = names.at(-1) as string
      return names.every(
        (n) => vocab.resolve(n.toUpperCase())?.canonical === live && vocab.resolve(n)?.requested === n,
      )
    }),
  )
  const v = new Vocabulary([
    { ...liveVerb('a.b'), status: 'deprecated', aliasOf: 'c.d' },
    { ...liveVerb('c.d'), status: 'deprecated', aliasOf: 'a.b' },
  ])
  t.equal(v.resolve('a.b'), null, 'an alias cycle never resolves')
  t.equal(v.resolve('nope.nope'), null)
  t.equal(v.resolve('Refund')?.canonical, 'refund')
})

function snapshot(over: Partial<TenantSnapshot> = {}): TenantSnapshot {
  return {
    tenantId: 'ten_a',
    version: 7,
    builtAt: 0,
    policies: { tenant: { policy: {}, version: 0, updatedAt: null }, environments: {}, principals: {} },
    verbs: [],
    principals: { prn_a: { name: 'a', disabled: false, deleted: false } },
    keys: { key_a: { principalId: 'prn_a', revoked: false, scope: 'admin' } },
    roster: { all: false, principals: [], keys: [] },
    grants: [],
    systems: [],
    ...over,
  }
}
const input = { keyId: 'key_a', verb: 'verify', target: null, environment: null, grantId: null }

t.test('an inert override never applies', async (t) => {
  fc.assert(
    fc.property(fc.constantFrom('disabled', 'deleted'), mode, mode, (state, overrideMode, tenantMode) => {
      const raw = snapshot({
        principals: { prn_a: { name: 'a', disabled: state === 'disabled', deleted: state === 'deleted' } },
        policies: {
          tenant: { policy: { verify: tenantMode }, version: 1, updatedAt: 1 },
          environments: {},
          principals: { prn_a: { policy: { verify: overrideMode }, version: 3, updatedAt: 1 } },
        },
      })
      const e = evaluate(new CompiledSnapshot(raw), input, 100)
      const vocab = new Vocabulary([])
      const view = foldLayers(
        vocab,
        principalStack(raw.policies.tenant, undefined, raw.policies.principals.prn_a, true),
      )
      return (
        e.kind === 'decided' &&
        e.outcome.decision === 'DENY' &&
        e.outcome.provenance === 'principal_inactive' &&
        view.effectivePolicy.verify === tenantMode &&
        view.policyProvenance.verify === 'tenant'
      )
    }),
  )
  t.pass('holds')
})

t.test('evaluation order: dead key, then roster, then the mode', async (t) => {
  const allow: PolicyLayer = { policy: { verify: 'allow' }, version: 1, updatedAt: 1 }
  const cases: [string, Partial<TenantSnapshot>, string, string][] = [
    [
      'revoked key beats the roster',
      {
        keys: { key_a: { principalId: 'prn_a', revoked: true, scope: 'admin' } },
        roster: { all: true, principals: [], keys: [] },
      },
      'key_revoked',
      'revocation',
    ],
    [
      'disabled principal',
      { principals: { prn_a: { name: 'a', disabled: true, deleted: false } } },
      'principal_disabled',
      'principal_inactive',
    ],
    [
      'deleted principal',
      { principals: { prn_a: { name: 'a', disabled: false, deleted: true } } },
      'principal_deleted',
      'principal_inactive',
    ],
    [
      'whole tenant on the roster',
      { roster: { all: true, principals: [], keys: [] } },
      'sponsor_revoked_tenant',
      'revocation',
    ],
    [
      'principal on the roster',
      { roster: { all: false, principals: ['prn_a'], keys: [] } },
      'sponsor_revoked_principal',
      'revocation',
    ],
    [
      'key on the roster',
      { roster: { all: false, principals: [], keys: ['key_a'] } },
      'sponsor_revoked_key',
      'revocation',
    ],
    ['unknown key', { keys: {} }, 'key_unknown', 'revocation'],
  ]
  for (const [label, over, reason, provenance] of cases) {
    const e = evaluate(
      new CompiledSnapshot(
        snapshot({ ...over, policies: { tenant: allow, environments: {}, principals: { prn_a: allow } } }),
      ),
      input,
      100,
    )
    t.match(
      e,
      { kind: 'decided', outcome: { decision: 'DENY', reason, provenance, policyVersion: 7 } },
      label,
    )
  }
  const modes: [Mode, string, string][] = [
    ['allow', 'ALLOW', 'policy_allow'],
    ['deny', 'DENY', 'policy_deny'],
    ['step_up', 'STEP_UP', 'step_up_required'],
    ['require_grant', 'DENY', 'grant_required'],
  ]
  for (const [m, decision, reason] of modes) {
    const e = evaluate(
      new CompiledSnapshot(
        snapshot({
          policies: {
            tenant: { policy: { verify: m }, version: 2, updatedAt: 1 },
            environments: {},
            principals: {},
          },
        }),
      ),
      input,
      100,
    )
    t.match(
      e,
      {
        kind: 'decided',
        outcome: { decision, reason, mode: m, provenance: 'tenant', layers: { tenant: 2, principal: 0 } },
      },
      m,
    )
  }
  t.same(evaluate(new CompiledSnapshot(snapshot()), { ...input, verb: 'made.up' }, 100), {
    kind: 'unknown_verb',
    verb: 'made.up',
  })
})

t.test(
  'require_grant: matching grants become candidates, presented first; settled by the commit',
  async (t) => {
    const grants = [
      {
        grantId: 'grt_any',
        verb: 'provision',
        target: null,
        principalId: null,
        environment: null,
        expiresAt: 500,
      },
      {
        grantId: 'grt_soon',
        verb: 'provision',
        target: null,
        principalId: 'prn_a',
        environment: null,
        expiresAt: 200,
      },
      {
        grantId: 'grt_otherTarget',
        verb: 'provision',
        target: 'x',
        principalId: null,
        environment: null,
        expiresAt: 300,
      },
      {
        grantId: 'grt_otherPrincipal',
        verb: 'provision',
        target: null,
        principalId: 'prn_b',
        environment: null,
        expiresAt: 300,
      },
      {
        grantId: 'grt_prod',
        verb: 'provision',
        target: null,
        principalId: null,
        environment: 'prod' as const,
        expiresAt: 300,
      },
      {
        grantId: 'grt_expired',
        verb: 'provision',
        target: null,
        principalId: null,
        environment: null,
        expiresAt: 100,
      },
      {
        grantId: 'grt_otherVerb',
        verb: 'admit',
        target: null,
        principalId: null,
        environment: null,
        expiresAt: 300,
      },
    ]
    const snap = new CompiledSnapshot(snapshot({ grants }))
    const e = evaluate(snap, { ...input, verb: 'provision', target: 'y', grantId: 'grt_any' }, 100)
    t.match(e, {
      kind: 'needs_grant',
      candidates: [
        { grantId: 'grt_any', expiresAt: 500 },
        { grantId: 'grt_soon', expiresAt: 200 },
      ],
    })
    if (e.kind !== 'needs_grant') throw new Error('unreachable')
    t.match(settleGrant(e, 'grt_soon'), {
      decision: 'ALLOW',
      provenance: 'grant',
      reason: 'grant_consumed',
      grantId: 'grt_soon',
    })
    t.match(settleGrant(e, null), {
      decision: 'DENY',
      reason: 'grant_required',
      mode: 'require_grant',
      provenance: 'tenant',
    })
    t.match(evaluate(snap, { ...input, verb: 'provision', environment: 'prod' }, 100), {
      kind: 'needs_grant',
      candidates: [{ grantId: 'grt_soon' }, { grantId: 'grt_prod' }, { grantId: 'grt_any' }],
    })
  },
)

t.test('resolveMode ignores layers that do not set the verb', async (t) => {
  const vocab = new Vocabulary([])
  t.same(
    resolveMode(
      vocab,
      {
        tenant: { policy: {}, version: 0, updatedAt: null },
        environment: { policy: { admit: 'allow' }, version: 1, updatedAt: 1 },
      },
      'admit',
    ),
    { mode: 'allow', provenance: 'environment' },
  )
})

t.test('a snapshot that has answered before answers as a fresh one would', async (t) => {
  const verbs = ['verify', 'provision', 'admit'] as const
  const grant = fc.record({
    grantId: fc.constantFrom('grt_1', 'grt_2', 'grt_3'),
    verb: fc.constantFrom(...verbs),
    target: fc.constantFrom(null, 'x', 'y'),
    principalId: fc.constantFrom(null, 'prn_a', 'prn_b'),
    environment: fc.constantFrom(null, 'prod' as const),
    expiresAt: fc.integer({ min: 90, max: 130 }),
  })
  const policy = fc.dictionary(fc.constantFrom(...verbs), mode)
  const raw = fc
    .record({
      tenant: policy,
      prod: policy,
      grants: fc.uniqueArray(grant, { selector: (g) => g.grantId, maxLength: 3 }),
      revoked: fc.boolean(),
      rostered: fc.boolean(),
    })
    .map((r) =>
      snapshot({
        policies: {
          tenant: { policy: r.tenant, version: 1, updatedAt: 1 },
          environments: { prod: { policy: r.prod, version: 2, updatedAt: 1 } },
          principals: {},
        },
        keys: {
          key_a: { principalId: 'prn_a', revoked: r.revoked, scope: 'agent' },
          key_b: { principalId: 'prn_b', revoked: false, scope: 'agent' },
        },
        principals: {
          prn_a: { name: 'a', disabled: false, deleted: false },
          prn_b: { name: 'b', disabled: false, deleted: false },
        },
        roster: { all: false, principals: [], keys: r.rostered ? ['key_b'] : [] },
        grants: r.grants,
      }),
    )
  const request = fc.record({
    keyId: fc.constantFrom('key_a', 'key_b', 'key_gone'),
    verb: fc.constantFrom(...verbs, 'Verify', 'made.up'),
    target: fc.constantFrom(null, 'x', 'y'),
    environment: fc.constantFrom(null, 'prod' as const),
    grantId: fc.constantFrom(null, 'grt_1', 'grt_2'),
    now: fc.integer({ min: 80, max: 140 }),
  })
  fc.assert(
    fc.property(raw, fc.array(request, { minLength: 1, maxLength: 30 }), (snap, requests) => {
      const shared = new CompiledSnapshot(snap)
      return requests.every(
        ({ now, ...input }) =>
          JSON.stringify(evaluate(shared, input, now)) ===
          JSON.stringify(evaluate(new CompiledSnapshot(snap), input, now)),
      )
    }),
    { numRuns: 500 },
  )
  const shared = new CompiledSnapshot(
    snapshot({
      policies: {
        tenant: { policy: { verify: 'allow' }, version: 1, updatedAt: 1 },
        environments: {},
        principals: {},
      },
    }),
  )
  const first = evaluate(shared, input, 100)
  t.equal(evaluate(shared, input, 100), first, 'a settled answer is kept, not folded again')
  t.ok(
    Object.isFrozen(first) && first.kind === 'decided' && Object.isFrozen(first.outcome),
    'and shared frozen',
  )
  for (let i = 0; i < 100; i++) evaluate(shared, { ...input, keyId: `key_unknown${i}` }, 100)
  t.same(
    [...shared.keyViews.keys()],
    [input.keyId],
    'per-key folds are kept for keys the snapshot knows only: callers cannot grow them',
  )
})

t.test('a credential outstanding at a revocation stays barred once it is lifted', async (t) => {
  const base = emptySnapshot('ten_a', 1, 0)
  const at = (extra: Partial<TenantSnapshot>) =>
    new CompiledSnapshot({
      ...base,
      keys: { key_a: { principalId: 'prn_a', revoked: false, scope: 'agent' } },
      principals: { prn_a: { name: 'a', disabled: false, deleted: false } },
      ...extra,
    })
  const lifted = (l: Partial<NonNullable<TenantSnapshot['roster']['lifted']>>) =>
    at({
      roster: { all: false, principals: [], keys: [], lifted: { all: null, principals: {}, keys: {}, ...l } },
    })
  // Outstanding at a revocation through second 100 (lifted since): issued then or before, barred.
  for (const [name, snap, reason] of [
    ['the key', lifted({ keys: { key_a: 100 } }), 'sponsor_revoked_key'],
    ['its principal', lifted({ principals: { prn_a: 100 } }), 'sponsor_revoked_principal'],
    ['the tenant', lifted({ all: 100 }), 'sponsor_revoked_tenant'],
    [
      'its principal disabled and enabled',
      at({ principals: { prn_a: { name: 'a', disabled: false, deleted: false, barredThrough: 100 } } }),
      'principal_disabled',
    ],
  ] as const) {
    t.match(standingSince(snap, 'key_a', 99), { reason }, `${name}: issued before`)
    t.match(standingSince(snap, 'key_a', 100), { reason }, `${name}: in its last second`)
    t.equal(standingSince(snap, 'key_a', 101), null, `${name}: issued after`)
    t.equal(standingOf(snap, 'key_a'), null, `${name}: the key itself is in good standing`)
  }
  t.equal(standingSince(at({}), 'key_a', 1), null, 'a snapshot of an earlier version: nothing lifted')
  t.match(
    standingSince(at({ roster: { all: true, principals: [], keys: [] } }), 'key_a', 500),
    { reason: 'sponsor_revoked_tenant' },
    'barred now bars whenever issued',
  )
})

t.test('mayAttempt: every mode but deny may be attempted; a revoked key may not', async (t) => {
  const offered = (m: Mode, over: Partial<TenantSnapshot> = {}) =>
    mayAttempt(
      evaluate(
        new CompiledSnapshot(
          snapshot({
            policies: { ...snapshot().policies, tenant: { policy: { verify: m }, version: 1, updatedAt: 1 } },
            ...over,
          }),
        ),
        input,
        100,
      ),
    )
  t.same(
    MODES.map((m) => [m, offered(m)]),
    [
      ['allow', true],
      ['deny', false],
      ['require_grant', true],
      ['step_up', true],
    ],
  )
  t.notOk(
    offered('allow', { roster: { all: true, principals: [], keys: [] } }),
    'the kill switch: nothing to offer',
  )
  t.notOk(
    mayAttempt(evaluate(new CompiledSnapshot(snapshot()), { ...input, verb: 'no.such' }, 100)),
    'an unknown verb',
  )
})
