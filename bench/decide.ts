/**
 * In-process decision speed: decisions per second and the p50/p99 of one decision, over a
 * snapshot with 200 custom verbs and 1,000 principals (issue 3). Run: npx tsx bench/decide.ts
 *
 * The baseline in the same run is a trivial function call over the same inputs, so the
 * figures can be read as a ratio on a shared, noisy machine.
 */
import { performance } from 'node:perf_hooks'
import { type CheckInput, evaluate } from '../src/core/evaluate.js'
import type { PolicyLayer } from '../src/core/policy-layers.js'
import { CompiledSnapshot, type TenantSnapshot } from '../src/core/snapshot.js'
import { BUILTIN_VERBS, type CustomVerb, MODES } from '../src/core/verbs.js'

const VERBS = 200
const PRINCIPALS = 1000
const SAMPLES = 200_000

function buildSnapshot(): TenantSnapshot {
  const verbs: CustomVerb[] = Array.from({ length: VERBS }, (_, i) => ({
    name: i % 10 === 9 ? `old.verb${i}` : `app.verb${i}`,
    description: '',
    status: i % 10 === 9 ? 'deprecated' : 'live',
    aliasOf: i % 10 === 9 ? `app.verb${i - 1}` : null,
    createdAt: 1,
    deprecatedAt: null,
  }))
  const live = verbs.filter((v) => v.status === 'live').map((v) => v.name)
  const layer = (seed: number, n: number): PolicyLayer => ({
    policy: Object.fromEntries(
      Array.from({ length: n }, (_, j) => [
        live[(seed * 7 + j * 13) % live.length] as string,
        MODES[(seed + j) % 4] as (typeof MODES)[number],
      ]),
    ),
    version: 1,
    updatedAt: 1,
  })
  const principals: TenantSnapshot['principals'] = {}
  const keys: TenantSnapshot['keys'] = {}
  const principalPolicies: Record<string, PolicyLayer> = {}
  for (let i = 0; i < PRINCIPALS; i++) {
    principals[`prn_${i}`] = { name: `p${i}`, disabled: i % 50 === 0, deleted: false }
    keys[`key_${i}`] = { principalId: `prn_${i}`, revoked: i % 97 === 0, scope: 'agent' }
    if (i % 3 === 0) principalPolicies[`prn_${i}`] = layer(i, 10)
  }
  return {
    tenantId: 'ten_bench',
    version: 42,
    builtAt: 0,
    policies: {
      tenant: layer(1, 100),
      environments: { dev: layer(2, 30), prod: layer(3, 30) },
      principals: principalPolicies,
    },
    verbs,
    principals,
    keys,
    roster: { all: false, principals: ['prn_7', 'prn_11'], keys: ['key_13'] },
    grants: Array.from({ length: 50 }, (_, i) => ({
      grantId: `grt_${i}`,
      verb: 'provision',
      target: i % 2 ? `t${i}` : null,
      principalId: null,
      environment: null,
      expiresAt: 2_000_000_000,
    })),
    systems: [],
  }
}

function percentile(sorted: Float64Array, p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] as number
}

const snap = new CompiledSnapshot(buildSnapshot())
const verbNames = [...Object.keys(BUILTIN_VERBS), ...snap.raw.verbs.map((v) => v.name)]
const envs = [null, 'dev', 'prod'] as const
const inputs: CheckInput[] = Array.from({ length: 4096 }, (_, i) => ({
  keyId: `key_${(i * 31) % PRINCIPALS}`,
  verb: verbNames[(i * 17) % verbNames.length] as string,
  target: i % 2 ? `t${i % 64}` : null,
  environment: envs[i % 3] ?? null,
  grantId: null,
}))

/** `before` runs outside the timed part of each sample. */
function measure(label: string, fn: (input: CheckInput) => unknown, before: () => void = () => {}) {
  for (let i = 0; i < 50_000; i++) fn(inputs[i % inputs.length] as CheckInput) // warm up the JIT
  const samples = new Float64Array(SAMPLES)
  let sink = 0
  const t0 = performance.now()
  for (let i = 0; i < SAMPLES; i++) {
    before()
    const s = performance.now()
    const r = fn(inputs[i % inputs.length] as CheckInput)
    samples[i] = performance.now() - s
    if (r) sink++
  }
  const total = performance.now() - t0
  samples.sort()
  const us = (ms: number) => (ms * 1000).toFixed(2)
  const row = {
    label,
    perSecond: Math.round(SAMPLES / (total / 1000)),
    p50us: us(percentile(samples, 0.5)),
    p99us: us(percentile(samples, 0.99)),
    p999us: us(percentile(samples, 0.999)),
    sink,
  }
  console.log(
    `${label.padEnd(28)} ${String(row.perSecond).padStart(10)} /s   p50 ${row.p50us} µs   p99 ${row.p99us} µs   p99.9 ${row.p999us} µs`,
  )
  return row
}

console.log(
  `decision core: ${VERBS} custom verbs (20 deprecated aliases), ${PRINCIPALS} principals, ${SAMPLES} samples, node ${process.version}`,
)
const baseline = measure('baseline (key lookup only)', (i) => snap.raw.keys[i.keyId])
// The snapshot keeps answers that need no grant, and per key what every decision folds again
// (principal, standing, layer stacks). So three figures: the first decision under a new snapshot
// (both dropped before each sample: right after a policy change), a first decision for this
// verb once the key has decided anything, and a repeated one. The target is for the first.
const decide = measure(
  'evaluate(), new snapshot',
  (i) => evaluate(snap, i, 1_800_000_000),
  () => {
    snap.settled.clear()
    snap.keyViews.clear()
  },
)
measure(
  'evaluate(), new verb for key',
  (i) => evaluate(snap, i, 1_800_000_000),
  () => snap.settled.clear(),
)
measure('evaluate(), repeated', (i) => evaluate(snap, i, 1_800_000_000))
console.log(
  `ratio p99 evaluate/baseline: ${(Number(decide.p99us) / Math.max(0.01, Number(baseline.p99us))).toFixed(1)}x (timer overhead is in both)`,
)
console.log(
  `target (first decision under a new snapshot): p99 <= 10 µs → ${Number(decide.p99us) <= 10 ? 'met' : 'NOT met'}`,
)
