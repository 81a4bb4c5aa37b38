import { Counter, Histogram, Registry } from 'prom-client'
import t from 'tap'
import { HotCounter, HotHistogram } from '../../src/observability/hot-path-metrics.js'

const BUCKETS = [0.001, 0.005, 0.01, 0.1, 1]
/** Values on, between, below and above the bounds. */
const VALUES = [0, 0.0005, 0.001, 0.003, 0.005, 0.0099, 0.01, 0.05, 0.5, 1, 2.5, 1000]

function registries() {
  const ours = new Registry()
  const theirs = new Registry()
  for (const r of [ours, theirs]) r.setDefaultLabels({ component: 'proxy' })
  return { ours, theirs }
}

t.test(
  'a HotHistogram exposes exactly what a prom-client Histogram does for the same observations',
  async (t) => {
    const { ours, theirs } = registries()
    const plain = new HotHistogram(ours, 'h_plain', 'help text', BUCKETS)
    const labelled = new HotHistogram(ours, 'h_sys', 'per system', BUCKETS, 'system')
    const plainRef = new Histogram({
      name: 'h_plain',
      help: 'help text',
      buckets: BUCKETS,
      registers: [theirs],
    })
    const labelledRef = new Histogram({
      name: 'h_sys',
      help: 'per system',
      buckets: BUCKETS,
      labelNames: ['system'],
      registers: [theirs],
    })
    VALUES.forEach((v, i) => {
      plain.observe(v)
      plainRef.observe(v)
      const system = i % 3 === 0 ? 'sys_a' : 'sys_b'
      labelled.observe(v, system)
      labelledRef.observe({ system }, v)
    })
    t.equal(await ours.metrics(), await theirs.metrics())
    t.match(await ours.metrics(), /h_sys_bucket\{le="\+Inf",component="proxy",system="sys_a"\} 4/)
  },
)

t.test('a HotCounter exposes exactly what a prom-client Counter does', async (t) => {
  const { ours, theirs } = registries()
  const c = new HotCounter(ours, 'decisions_total', 'Committed decisions', ['decision', 'verb', 'system'])
  const ref = new Counter({
    name: 'decisions_total',
    help: 'Committed decisions',
    labelNames: ['decision', 'verb', 'system'],
    registers: [theirs],
  })
  const seen: [string, string, string][] = [
    ['ALLOW', 'refund', 'sys_billing'],
    ['DENY', 'refund', 'sys_billing'],
    ['ALLOW', 'refund', 'sys_billing'],
    ['STEP_UP', 'deploy', ''],
  ]
  for (const [decision, verb, system] of seen) {
    c.inc(decision, verb, system)
    ref.inc({ decision, verb, system })
  }
  t.equal(await ours.metrics(), await theirs.metrics())
  t.match(
    await ours.metrics(),
    /decisions_total\{decision="ALLOW",verb="refund",system="sys_billing",component="proxy"\} 2/,
  )
})

t.test('reset empties them, and a non-finite observation is refused', async (t) => {
  const { ours } = registries()
  const h = new HotHistogram(ours, 'h', 'h', BUCKETS)
  const c = new HotCounter(ours, 'c_total', 'c', ['a'])
  h.observe(0.002)
  c.inc('x')
  ours.resetMetrics()
  t.notMatch(await ours.metrics(), /h_count|c_total\{/)
  t.throws(() => h.observe(Number.NaN), TypeError)
  t.throws(() => h.observe(Number.POSITIVE_INFINITY), TypeError)
})
