import { join } from 'node:path'
import t from 'tap'
import { parse as parseYaml } from 'yaml'
import { parseSettings } from '../../src/config/load.js'
import { CHART, find, NAMESPACE, RELEASE, renderChart } from '../helpers/chart.js'
import { helm } from '../helpers/helm.js'

const MINIMAL = ['-f', join(CHART, 'examples', 'minimal.yaml')]
const template = (sets: readonly string[]) =>
  helm(['template', RELEASE, CHART, '-n', NAMESPACE, ...MINIMAL, ...sets.flatMap((s) => ['--set', s])])

// Found in review: each of these installed, and then every injector replica refused its settings
// at start (with failurePolicy Fail, no pod could be created in an injected namespace).
t.test('helm refuses injector values the injector would refuse at start', async (t) => {
  const refused: [string, RegExp][] = [
    ['injector.proxy.noProxy[0]=0.0.0.0/0', /injector\/proxy\/noProxy\/0/],
    ['injector.proxy.noProxy[0]=::/0', /injector\/proxy\/noProxy\/0/],
    ['injector.proxy.noProxy[0]=1.0.0.0/4', /injector\/proxy\/noProxy\/0/],
    ['injector.defaults.routesConfigMap=Bad', /injector\/defaults\/routesConfigMap/],
    ['injector.defaults.tlsCaSecret=Bad_CA', /injector\/defaults\/tlsCaSecret/],
    ['injector.proxy.resources.limits.cpu=lots', /injector\/proxy\/resources\/limits\/cpu/],
    ['injector.proxy.tag=bad tag', /injector\/proxy\/tag/],
    ['injector.enforce.excludeOutboundCidrs[0]=:::/40', /injector\/enforce\/excludeOutboundCidrs\/0/],
  ]
  const results = await Promise.all(refused.map(([set]) => template([set])))
  refused.forEach(([set, pattern], i) => {
    const r = results[i]!
    t.not(r.code, 0, `refused: ${set}`)
    t.match(r.stderr, pattern)
  })
})

t.test('what helm takes, the injector takes', async (t) => {
  const objects = await renderChart([
    ...MINIMAL,
    ...['--set', 'injector.proxy.noProxy[0]=10.0.0.0/8', '--set', 'injector.proxy.noProxy[1]=fd00::/7'],
    ...['--set', 'injector.defaults.routesConfigMap=routes', '--set', 'injector.defaults.tlsCaSecret=wg-ca'],
    ...['--set-string', 'injector.proxy.resources.limits.cpu=2', '--set', 'injector.proxy.tag=0.2.0'],
    ...['--set', 'injector.enforce.excludeOutboundCidrs[0]=2001:db8::/40'],
  ])
  const settings = parseSettings(
    parseYaml(find(objects, 'ConfigMap', `${RELEASE}-writegate-config`).data['writegate.yaml']),
  )
  t.same(settings.injector.proxy.noProxy, ['10.0.0.0/8', 'fd00::/7'])
  t.equal(settings.injector.defaults.tlsCaSecret, 'wg-ca')
  t.match(settings.injector.proxy.image, /:0\.2\.0$/)
  t.same(settings.injector.enforce.excludeOutboundCidrs, ['2001:db8::/40'])
})

// Found in review: a proxy port equal to its metrics or TLS port made every injected proxy exit.
t.test("the injected proxy's ports must differ, as the settings require", async (t) => {
  const clashes: [string, RegExp][] = [
    [
      'injector.proxy.port=9464',
      /injector\.proxy\.metricsPort \(9464\) must differ from injector\.proxy\.port/,
    ],
    [
      'injector.proxy.port=15443',
      /injector\.proxy\.tlsPort \(15443\) must differ from injector\.proxy\.port/,
    ],
    [
      'injector.proxy.metricsPort=15443',
      /injector\.proxy\.tlsPort \(15443\) must differ from injector\.proxy\.metricsPort/,
    ],
  ]
  const results = await Promise.all(clashes.map(([set]) => template([set])))
  clashes.forEach(([set, pattern], i) => {
    const r = results[i]!
    t.not(r.code, 0, `refused: ${set}`)
    t.match(r.stderr, pattern)
    t.notMatch(r.stderr, /goroutine|\.go:\d+/, 'no trace')
  })
  const moved = await template(['injector.proxy.port=15002', 'injector.proxy.metricsPort=15001'])
  t.equal(moved.code, 0, moved.stderr)
  const off = await template(['injector.enabled=false', 'injector.proxy.port=9464'])
  t.equal(off.code, 0, `no injector, no proxies: ${off.stderr}`)
})

// Found in review: a percentage was never checked, so 100% (or 51% of 2) kept every replica up.
t.test('a percentage disruption budget is checked as Kubernetes rounds it, up', async (t) => {
  const refused: [string[], RegExp][] = [
    [
      ['injector.pdb.minAvailable=100%'],
      /injector\.pdb\.minAvailable \(100% of 2 replicas, that is 2\) must keep fewer than the injector's replicas/,
    ],
    [['injector.pdb.minAvailable=51%'], /injector\.pdb\.minAvailable \(51% of 2 replicas, that is 2\)/],
    [['injector.replicas=3', 'injector.pdb.minAvailable=67%'], /\(67% of 3 replicas, that is 3\)/],
    [['controlPlane.pdb.minAvailable=100%'], /controlPlane\.pdb\.minAvailable \(100% of 2 replicas/],
  ]
  const taken = [
    ['injector.pdb.minAvailable=50%'],
    ['injector.replicas=3', 'injector.pdb.minAvailable=66%'],
    ['injector.pdb.minAvailable=0%'],
    ['controlPlane.replicas=3', 'controlPlane.pdb.minAvailable=60%'],
  ]
  const [bad, good] = await Promise.all([
    Promise.all(refused.map(([sets]) => template(sets))),
    Promise.all(taken.map((sets) => template(sets))),
  ])
  refused.forEach(([sets, pattern], i) => {
    t.not(bad[i]!.code, 0, `refused: ${sets.join(' ')}`)
    t.match(bad[i]!.stderr, pattern)
  })
  taken.forEach((sets, i) => {
    t.equal(good[i]!.code, 0, `${sets.join(' ')}: ${good[i]!.stderr}`)
  })
})
