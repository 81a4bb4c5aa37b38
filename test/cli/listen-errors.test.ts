import { randomBytes } from 'node:crypto'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { createServer, type Server } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { newAuditSigningKeyPem } from '../../src/security/audit-signing-key.js'
import { openTestDatabase } from '../helpers/backends.js'
import { ROOT, runCli } from '../helpers/cli.js'
import { selfSigned } from '../helpers/self-signed.js'
import { TEST_REDIS_URL } from '../helpers/servers.js'

/** A port held by this test, on the loopback address every listener below is given. */
async function busyPort(t: Test): Promise<number> {
  const server: Server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())))
  return (server.address() as { port: number }).port
}

const LOOPBACK = {
  WRITEGATE_HOST: '127.0.0.1',
  WRITEGATE_PROXY_HOST: '127.0.0.1',
  WRITEGATE_METRICS_HOST: '127.0.0.1',
  WRITEGATE_INJECTOR_HOST: '127.0.0.1',
  WRITEGATE_PORT: '0',
  WRITEGATE_PROXY_PORT: '0',
  WRITEGATE_METRICS_PORT: '0',
  WRITEGATE_INJECTOR_PORT: '0',
  WRITEGATE_LOG_LEVEL: 'silent',
}

t.test(
  'a port in use is blamed on the setting of the listener that wanted it, in every process',
  async (t) => {
    const db = await openTestDatabase('postgres')
    t.teardown(() => db.close())
    const keys = mkdtempSync(join(tmpdir(), 'wg-listen-'))
    writeFileSync(join(keys, 'master.key'), randomBytes(32).toString('base64'))
    writeFileSync(join(keys, 'audit.pem'), newAuditSigningKeyPem().privatePem)
    const controlPlane = {
      ...LOOPBACK,
      WRITEGATE_DATABASE_URL: db.url as string,
      WRITEGATE_MASTER_KEY_FILE: join(keys, 'master.key'),
      WRITEGATE_AUDIT_SIGNING_KEY_FILE: join(keys, 'audit.pem'),
    }
    const proxy = {
      ...LOOPBACK,
      WRITEGATE_REDIS_URL: TEST_REDIS_URL,
      WRITEGATE_ROUTES_FILE: join(ROOT, 'config', 'systems.example.yaml'),
      BILLING_API_TOKEN: 'x',
    }
    const tls = selfSigned('injector')
    const injector = {
      ...LOOPBACK,
      WRITEGATE_INJECTOR_TLS_CERT_FILE: tls.cert,
      WRITEGATE_INJECTOR_TLS_KEY_FILE: tls.key,
    }
    const port = await busyPort(t)
    const cases: [string, Record<string, string>, string][] = [
      ['start', { ...controlPlane, WRITEGATE_PORT: String(port) }, 'server.port (WRITEGATE_PORT)'],
      ['start', { ...controlPlane, WRITEGATE_PROXY_PORT: String(port) }, 'proxy.port (WRITEGATE_PROXY_PORT)'],
      [
        'start',
        { ...controlPlane, WRITEGATE_METRICS_PORT: String(port) },
        'metrics.port (WRITEGATE_METRICS_PORT)',
      ],
      // The standalone proxy's own port is free here: its metrics port is what clashes.
      ['proxy', { ...proxy, WRITEGATE_METRICS_PORT: String(port) }, 'metrics.port (WRITEGATE_METRICS_PORT)'],
      ['proxy', { ...proxy, WRITEGATE_PROXY_PORT: String(port) }, 'proxy.port (WRITEGATE_PROXY_PORT)'],
      [
        'injector',
        { ...injector, WRITEGATE_INJECTOR_PORT: String(port) },
        'injector.port (WRITEGATE_INJECTOR_PORT)',
      ],
    ]
    for (let i = 0; i < cases.length; i += 2) {
      const pair = cases.slice(i, i + 2)
      const results = await Promise.all(pair.map(([command, env]) => runCli([command], { env })))
      pair.forEach(([command, , setting], j) => {
        const r = results[j] as Awaited<ReturnType<typeof runCli>>
        t.equal(r.code, 1, `${command}: ${r.stderr}`)
        t.equal(r.stderr, `writegate: invalid setting ${setting}: 127.0.0.1:${port} is in use`, command)
      })
    }
  },
)

t.test('an address this machine does not have is blamed on the host setting', async (t) => {
  // 192.0.2.0/24 is TEST-NET-1: never an address of this machine.
  const tls = selfSigned('injector')
  const r = await runCli(['injector'], {
    env: {
      ...LOOPBACK,
      WRITEGATE_INJECTOR_HOST: '192.0.2.1',
      WRITEGATE_INJECTOR_TLS_CERT_FILE: tls.cert,
      WRITEGATE_INJECTOR_TLS_KEY_FILE: tls.key,
    },
  })
  t.equal(r.code, 1)
  t.equal(
    r.stderr,
    'writegate: invalid setting injector.host (WRITEGATE_INJECTOR_HOST): cannot listen on 192.0.2.1: not an address of this machine (EADDRNOTAVAIL)',
  )
})
