import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { stringify } from 'yaml'
import { loadSystemsFile } from '../../src/config/systems.js'
import { CHART, find, NAMESPACE, RELEASE, renderChart } from '../helpers/chart.js'
import { helm } from '../helpers/helm.js'

const MINIMAL = join(CHART, 'examples', 'minimal.yaml')
const JOB = `${RELEASE}-writegate-systems-apply`

const BILLING = {
  systemId: 'sys_billing',
  upstream: 'https://billing.example.com',
  credential: { header: 'authorization', prefix: 'Bearer ', fromEnv: 'BILLING_API_TOKEN' },
  routes: [{ method: 'POST', path: '/v1/refunds', verb: 'refund', target: 'refunds' }],
}

function valuesFile(values: unknown): string {
  const dir = mkdtempSync(join(tmpdir(), 'wg-chart-apply-'))
  const file = join(dir, 'values.yaml')
  writeFileSync(file, stringify(values))
  return file
}

t.test('systems.apply renders a post-install/upgrade Job that applies the listed systems', async (t) => {
  const objects = await renderChart([
    '-f',
    MINIMAL,
    '-f',
    valuesFile({
      systems: { apply: { enabled: true, apiKeySecret: 'wg-admin', prune: true, systems: [BILLING] } },
    }),
  ])
  const job = find(objects, 'Job', JOB)
  t.ok(job, 'the Job is rendered')
  t.equal(job.metadata.annotations['helm.sh/hook'], 'post-install,post-upgrade')
  t.equal(job.metadata.annotations['helm.sh/hook-weight'], '10', 'after the control plane is up')
  const pod = job.spec.template.spec
  t.equal(pod.automountServiceAccountToken, false, 'it calls writegate, not Kubernetes')
  const c = pod.containers[0]
  t.same(c.args, ['systems', 'apply', '-f', '/etc/writegate/systems-apply/systems.yaml', '--prune'])
  const env = Object.fromEntries(c.env.map((e: { name: string }) => [e.name, e]))
  t.match(env.WRITEGATE_URL.value, new RegExp(`^http://${RELEASE}-writegate\\.${NAMESPACE}\\.svc:\\d+$`))
  t.same(env.WRITEGATE_API_KEY.valueFrom.secretKeyRef, { name: 'wg-admin', key: 'api-key' })
  t.notOk(JSON.stringify(c.env).includes('value":"wg_'), 'the key comes from the Secret only')

  const cm = find(objects, 'ConfigMap', JOB)
  t.ok(cm, 'the systems are in a ConfigMap of their own')
  t.equal(cm.metadata.annotations['helm.sh/hook-weight'], '-1', 'created before the Job that reads it')
  t.equal(pod.volumes.find((v: { name: string }) => v.name === 'systems').configMap.name, JOB)

  // What the Job reads is a file `writegate systems apply -f` accepts, holding the same record.
  const file = join(mkdtempSync(join(tmpdir(), 'wg-chart-apply-')), 'systems.yaml')
  writeFileSync(file, cm.data['systems.yaml'])
  const loaded = loadSystemsFile(file, '-f')
  t.equal(loaded.systems.length, 1)
  t.match(loaded.systems[0], { systemId: 'sys_billing', upstream: 'https://billing.example.com' })
})

t.test('systems.apply can read an existing ConfigMap instead, and renders nothing when off', async (t) => {
  const objects = await renderChart([
    '-f',
    MINIMAL,
    '--set',
    'systems.apply.enabled=true',
    '--set',
    'systems.apply.apiKeySecret=wg-admin',
    '--set',
    'systems.apply.existingConfigMap=my-systems',
  ])
  const job = find(objects, 'Job', JOB)
  t.equal(
    job.spec.template.spec.volumes.find((v: { name: string }) => v.name === 'systems').configMap.name,
    'my-systems',
  )
  t.notOk(find(objects, 'ConfigMap', JOB), 'no ConfigMap of its own')
  t.notOk(job.spec.template.spec.containers[0].args.includes('--prune'), 'prune only when asked')

  const off = await renderChart(['-f', MINIMAL])
  t.notOk(find(off, 'Job', JOB), 'off by default')
})

t.test(
  'systems.apply without its key Secret or its systems fails with a message naming the value',
  async (t) => {
    const cases: [string[], RegExp][] = [
      [
        ['--set', 'systems.apply.enabled=true', '--set', 'systems.apply.existingConfigMap=x'],
        /systems\.apply\.apiKeySecret/,
      ],
      [
        ['--set', 'systems.apply.enabled=true', '--set', 'systems.apply.apiKeySecret=k'],
        /systems\.apply: set systems/,
      ],
    ]
    for (const [args, pattern] of cases) {
      const r = await helm(['template', RELEASE, CHART, '-n', NAMESPACE, '-f', MINIMAL, ...args])
      t.not(r.code, 0, args.join(' '))
      t.match(r.stderr, pattern)
    }
  },
)
