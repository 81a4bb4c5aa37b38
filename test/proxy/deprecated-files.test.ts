import { generate } from 'otplib'
import t from 'tap'
import { parseSettings } from '../../src/config/load.js'
import { startProxy, startProxyProcess } from '../../src/proxy/proxy-process.js'
import { createInterceptionCa } from '../../src/tls/interception-ca.js'
import { startControlPlane } from '../helpers/control-plane.js'
import { startFleet } from '../helpers/fleet.js'
import { agentRequest, capturingLogger, LOG_LEVEL, waitReady } from '../helpers/proxy.js'
import { billingSystems, writeRoutesFile } from '../helpers/proxy-fixtures.js'
import { RecordingUpstream } from '../helpers/upstream.js'

/**
 * Issue 15: the systems files keep working for one release as an import path, each with a
 * deprecation line in the log.
 */

t.test("a standalone proxy's routes file is still served, with a deprecation line", async (t) => {
  const fleet = await startFleet(t, { proxies: 0 })
  const legacy = await new RecordingUpstream().start()
  t.teardown(() => legacy.close())
  const file = writeRoutesFile({
    passthrough: [],
    systems: [
      {
        systemId: 'sys_legacy',
        kind: 'http' as const,
        upstream: legacy.origin,
        credential: { header: 'authorization', prefix: 'Bearer ', fromEnv: 'LEGACY_TOKEN' },
        reads: 'pass',
        routes: [{ method: 'POST', path: '/v1/verify', verb: 'verify' }],
        tools: [],
      },
    ],
  })
  const { logger, lines } = capturingLogger()
  const settings = parseSettings({
    redis: { url: fleet.redisUrl, keyPrefix: fleet.prefix },
    proxy: { port: 0, host: '127.0.0.1', routesFile: file },
    metrics: { port: 0, host: '127.0.0.1' },
    credentials: { allowEnv: ['BILLING_TOKEN'] },
  })
  // LEGACY_TOKEN is in no allow-list: the operator named it in the file, which allows it.
  const p = await startProxyProcess(settings, {
    env: { WRITEGATE_PROXY_API_KEY: fleet.agent.apiKey, LEGACY_TOKEN: 'legacy-secret', BILLING_TOKEN: 'b' },
    clock: fleet.cp.clock,
    logger,
  })
  t.teardown(() => p.close())
  await waitReady(p)
  const r = await agentRequest(p.port, { method: 'POST', path: '/sys_legacy/v1/verify', body: '{}' })
  t.equal(r.status, 200)
  t.equal(legacy.received[0]?.headers.authorization, 'Bearer legacy-secret')
  const enrolled = await agentRequest(p.port, { method: 'POST', path: '/sys_billing/v1/verify', body: '{}' })
  t.equal(enrolled.status, 200, "the tenant's enrolled systems are served beside it")
  const deprecated = lines.filter((l) => l.level === LOG_LEVEL.warn && /is deprecated/.test(l.msg))
  t.equal(deprecated.length, 1)
  t.match(
    deprecated[0]?.msg,
    /proxy\.routesFile \(WRITEGATE_ROUTES_FILE\) is deprecated.*writegate systems apply/,
  )
})

t.test("the control plane's systems file is enrolled at start-up into the tenants it names", async (t) => {
  const upstream = 'https://billing.example.com'
  const { logger, lines } = capturingLogger()
  const first = await startControlPlane(t, 'pglite-memory')
  const tenant = await first.api.newTenant()
  const receipts = async (kind: string) =>
    (
      await first.db.db.sql<{ body: string }[]>`select body from receipts
        where tenant_id = ${tenant.tenantId} and kind = ${kind} order by seq`
    ).map((r) => JSON.parse(r.body))
  await first.cp.close()

  const file = billingSystems(upstream, tenant.tenantId)
  const second = await startControlPlane(t, 'pglite-memory', { db: first.db, systems: file, logger })
  t.match(await receipts('SYSTEM_CREATE'), [
    {
      target: 'sys_billing',
      keyId: null,
      detail: { actor: { type: 'operator', source: 'systemsFile' }, version: 1 },
    },
  ])
  t.equal(
    lines.filter(
      (l) => l.level === LOG_LEVEL.warn && /systemsFile \(WRITEGATE_SYSTEMS_FILE\) is deprecated/.test(l.msg),
    ).length,
    1,
  )
  await second.cp.close()

  // The same file again: nothing changes. A changed one: a new version.
  const third = await startControlPlane(t, 'pglite-memory', { db: first.db, systems: file })
  await third.cp.close()
  t.equal((await receipts('SYSTEM_CREATE')).length, 1)
  t.equal((await receipts('SYSTEM_UPDATE')).length, 0)
  const changed = { ...file, systems: file.systems.map((s) => ({ ...s, reads: 'gate' as const })) }
  const fourth = await startControlPlane(t, 'pglite-memory', { db: first.db, systems: changed })
  await fourth.cp.close()
  t.match(await receipts('SYSTEM_UPDATE'), [
    { detail: { previousVersion: 1, version: 2, publicOnly: false } },
  ])
  // Found in review: a change to a field the comparison left out (caBundle, kind, mcp, graphql)
  // was taken for no change, and never applied.
  const { certPem } = await createInterceptionCa({ hosts: ['billing.example.com'], days: 1 })
  const bundled = { ...changed, systems: changed.systems.map((s) => ({ ...s, caBundle: certPem })) }
  const fifth = await startControlPlane(t, 'pglite-memory', { db: first.db, systems: bundled })
  const stored = (await fifth.api.get('/v1/systems/sys_billing', { bearer: tenant.apiKey })).body
  await fifth.cp.close()
  t.same([stored.version, stored.caBundle], [3, certPem], 'a new bundle is a new version')

  // A system that names no tenant, or an unknown one, stops start-up naming it.
  for (const [bad, message] of [
    [
      { ...file, systems: file.systems.map(({ tenantId: _, ...s }) => s) },
      /system sys_billing: tenantId: required/,
    ],
    [
      { ...file, systems: file.systems.map((s) => ({ ...s, tenantId: 'ten_nobody' })) },
      /system sys_billing: tenantId: no tenant ten_nobody/,
    ],
  ] as const)
    await t.rejects(startControlPlane(t, 'pglite-memory', { db: first.db, systems: bad }), message)
})

t.test(
  "the embedded default enrols its routes file for the proxy's tenant, so a staged write can be approved",
  async (t) => {
    process.env.BILLING_TOKEN = 'embedded-secret'
    const upstream = await new RecordingUpstream().start()
    t.teardown(() => upstream.close())
    // One settings object for both, as `writegate start` has: the control plane (which approves)
    // reads the routes file too, so the credential it names is allowed there as well.
    const shared = {
      proxy: { port: 0, host: '127.0.0.1', routesFile: writeRoutesFile(billingSystems(upstream.origin)) },
    }
    const { api, cp, clock } = await startControlPlane(t, 'pglite-memory', { settings: shared })
    const tenant = await api.newTenant()
    const agent = await api.post(
      '/v1/keys',
      { email: tenant.email, scope: 'agent' },
      { bearer: tenant.apiKey },
    )
    const settings = parseSettings({ log: { level: 'silent' }, ...shared })
    const proxy = await startProxy(settings, cp, {
      metricsServer: false,
      env: { WRITEGATE_PROXY_API_KEY: agent.body.apiKey, BILLING_TOKEN: 'embedded-secret' },
      enrolRoutesFile: (tenantId, file) => cp.enrolRoutesFile(tenantId, file),
    })
    t.teardown(() => proxy.close())
    await waitReady(proxy)
    t.match((await api.get('/v1/systems', { bearer: tenant.apiKey })).body, {
      systems: [{ systemId: 'sys_billing', version: 1 }],
    })
    const staged = await agentRequest(proxy.port, {
      method: 'POST',
      path: '/sys_billing/v1/refunds',
      body: '{"charge":"ch_9"}',
    })
    t.equal(staged.status, 428)
    const code = await generate({ secret: tenant.totp.secret, epoch: Math.floor(clock.nowMs() / 1000) })
    const approved = await api.post(
      `/v1/agent/actions/${staged.json().actionId}/approve`,
      { totpCode: code },
      { bearer: tenant.apiKey },
    )
    t.same([approved.status, approved.body.type], [200, 'executed'], JSON.stringify(approved.body))
    t.same(
      [upstream.received[0]?.url, upstream.received[0]?.headers.authorization],
      ['/v1/refunds', 'Bearer embedded-secret'],
    )
  },
)
