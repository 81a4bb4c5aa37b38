import { spawnSync } from 'node:child_process'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { persistDurable } from '../../src/audit/persist-durable.js'
import { draft } from '../../src/core/receipt.js'
import { createSystemOfRecord } from '../../src/store/postgres/system-of-record.js'
import { startFleet } from '../helpers/fleet.js'
import { agentRequest } from '../helpers/proxy.js'

t.test('metrics: the proxy exports its series on its own port', async (t) => {
  const fleet = await startFleet(t, { proxies: 1 })
  const p = fleet.proxies[0]!
  await agentRequest(p.port, { method: 'POST', path: '/sys_billing/v1/verify', body: '{}' })
  await agentRequest(p.port, { method: 'POST', path: '/sys_billing/v1/provision/x', body: '{}' })
  const text = await (await fetch(`http://127.0.0.1:${p.metricsPort}/metrics`)).text()
  t.match(
    text,
    /writegate_decisions_total\{decision="ALLOW",verb="verify",system="sys_billing",component="proxy"\} 1/,
  )
  t.match(
    text,
    /writegate_decisions_total\{decision="DENY",verb="provision",system="sys_billing",component="proxy"\} 1/,
  )
  for (const name of [
    'writegate_decision_duration_seconds_bucket',
    'writegate_gate_duration_seconds_count',
    'writegate_upstream_duration_seconds_count',
    'writegate_snapshot_version{',
    'writegate_snapshot_age_seconds{',
    'writegate_commit_retries_total',
    'writegate_fail_closed_total',
  ]) {
    t.ok(text.includes(name), name)
  }
  const other = await fetch(`http://127.0.0.1:${p.metricsPort}/other`)
  t.same([other.status, await other.json()], [404, { error: 'not found', code: 'not_found' }])
  const onAgentPort = await agentRequest(p.port, { method: 'GET', path: '/metrics' })
  t.same(
    [onAgentPort.status, onAgentPort.json().code],
    [403, 'not_enrolled'],
    'metrics are not on the agent-facing port (its own Host is no enrolled upstream)',
  )
})

t.test('the drain is idempotent: a redelivered payload changes nothing', async (t) => {
  const fleet = await startFleet(t, { proxies: 0 })
  const sor = createSystemOfRecord(fleet.cp.database!)
  const payload = {
    receipts: [
      draft({
        receiptId: 'rcp_redelivered1',
        tenantId: fleet.tenant.tenantId,
        kind: 'CHECK',
        decision: 'ALLOW',
        createdAt: 1,
        detail: { via: 'proxy' },
      }),
    ],
    actions: [],
  }
  const first = await persistDurable(sor, fleet.cp.auditTrail.log, payload)
  const again = await persistDurable(sor, fleet.cp.auditTrail.log, payload)
  t.equal(again[0]?.seq, first[0]?.seq)
  const rows = await fleet.cp.database!.sql<
    { n: number }[]
  >`select count(*)::int as n from receipts where receipt_id = 'rcp_redelivered1'`
  t.equal(rows[0]?.n, 1)
})

t.test('writegate proxy refuses bad settings with one line', async (t) => {
  const root = join(import.meta.dirname, '..', '..')
  const run = (env: Record<string, string>) =>
    spawnSync(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'proxy'], {
      cwd: root,
      env: { PATH: process.env.PATH ?? '', WRITEGATE_CONFIG: join(root, 'config', 'writegate.yaml'), ...env },
      encoding: 'utf8',
      timeout: 60_000,
    })
  const badKeyFile = join(mkdtempSync(join(tmpdir(), 'wg-key-')), 'api-key')
  writeFileSync(badKeyFile, 'not-a-key\n')
  const cases: [Record<string, string>, RegExp][] = [
    [{}, /^writegate: invalid setting redis\.url \(WRITEGATE_REDIS_URL\): the proxy needs Redis/],
    [
      { WRITEGATE_REDIS_URL: 'redis://127.0.0.1:6379', WRITEGATE_ROUTES_FILE: '/nope.yaml' },
      /^writegate: invalid setting proxy\.routesFile \(WRITEGATE_ROUTES_FILE\): file \/nope\.yaml does not exist/,
    ],
    [
      {
        WRITEGATE_REDIS_URL: 'redis://127.0.0.1:6379',
        WRITEGATE_ROUTES_FILE: join(root, 'config', 'systems.example.yaml'),
        BILLING_API_TOKEN: 'x',
        WRITEGATE_PROXY_API_KEY: 'not-a-key',
      },
      /^writegate: invalid setting WRITEGATE_PROXY_API_KEY: not a writegate API key/,
    ],
    [
      {
        WRITEGATE_REDIS_URL: 'redis://127.0.0.1:6379',
        WRITEGATE_ROUTES_FILE: join(root, 'config', 'systems.example.yaml'),
        BILLING_API_TOKEN: 'x',
        WRITEGATE_PROXY_API_KEY_FILE: badKeyFile,
      },
      /^writegate: invalid setting proxy\.apiKeyFile \(WRITEGATE_PROXY_API_KEY_FILE\): not a writegate API key/,
    ],
  ]
  for (const [env, pattern] of cases) {
    const r = run(env)
    t.equal(r.status, 1, JSON.stringify(env))
    t.match(r.stderr.trim(), pattern)
    t.equal(r.stderr.trim().split('\n').length, 1)
  }
})

t.test('writegate start refuses a bad key for its embedded proxy before anything listens', async (t) => {
  const root = join(import.meta.dirname, '..', '..')
  const r = spawnSync(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'start'], {
    cwd: root,
    env: {
      PATH: process.env.PATH ?? '',
      WRITEGATE_CONFIG: join(root, 'config', 'writegate.yaml'),
      WRITEGATE_DATABASE_URL: 'memory://',
      WRITEGATE_PORT: '0',
      WRITEGATE_PROXY_PORT: '0',
      WRITEGATE_METRICS_PORT: '0',
      WRITEGATE_PROXY_API_KEY: 'not-a-key',
    },
    encoding: 'utf8',
    timeout: 60_000,
  })
  t.equal(r.status, 1)
  t.match(r.stderr.trim(), /^writegate: invalid setting WRITEGATE_PROXY_API_KEY: not a writegate API key/)
  t.equal(r.stderr.trim().split('\n').length, 1)
  t.equal(r.stdout, '', 'nothing said it was listening')
})
