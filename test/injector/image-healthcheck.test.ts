import { execFile } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import t from 'tap'
import { parseSettings } from '../../src/config/load.js'
import { createInjector } from '../../src/injector/injector-process.js'
import { createLogger } from '../../src/observability/logger.js'
import { selfSigned } from '../helpers/self-signed.js'

const dockerfile = readFileSync(join(import.meta.dirname, '..', '..', 'Dockerfile'), 'utf8')

/** The HEALTHCHECK command of the image, exactly as the Dockerfile has it. */
function healthcheckScript(): string {
  const m = dockerfile.match(/HEALTHCHECK[^\n]*\\\n\s*CMD (\[.*\])\n/)
  if (!m?.[1]) throw new Error('no HEALTHCHECK CMD in the Dockerfile')
  const argv = JSON.parse(m[1]) as string[]
  t.same(argv.slice(0, 2), ['node', '-e'])
  return argv[2] as string
}

function runCheck(env: Record<string, string>): Promise<number> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['-e', healthcheckScript()],
      { env: { PATH: process.env.PATH ?? '', ...env }, timeout: 10_000 },
      (err) => resolve(err ? (typeof err.code === 'number' ? err.code : 1) : 0),
    )
  })
}

t.test('the image runs as a numeric non-root user and ships iptables for the enforce init', async (t) => {
  t.match(dockerfile, /^USER 1000:1000$/m)
  t.match(dockerfile, /apt-get install -y --no-install-recommends iptables/)
  t.match(dockerfile, /^ENTRYPOINT \["node", "dist\/cli\/main\.js"\]$/m)
})

t.test('the HEALTHCHECK probes the control plane over HTTP and the injector over HTTPS', async (t) => {
  const plain = createServer((req, res) => {
    res.statusCode = req.url === '/healthz' ? 200 : 404
    res.end()
  })
  await new Promise<void>((r) => plain.listen(0, '127.0.0.1', r))
  t.teardown(() => plain.close())
  const httpPort = (plain.address() as AddressInfo).port
  t.equal(await runCheck({ WRITEGATE_PORT: String(httpPort) }), 0, 'control plane healthy')
  t.equal(
    await runCheck({ WRITEGATE_HEALTH_URL: `http://127.0.0.1:${httpPort}/nope` }),
    1,
    'a non-200 is unhealthy',
  )

  const tls = selfSigned('injector')
  const injector = createInjector(
    parseSettings({
      injector: { host: '127.0.0.1', port: 0, tls: { certFile: tls.cert, keyFile: tls.key } },
    }),
    { logger: createLogger('silent') },
  )
  const { port } = await injector.listen()
  t.teardown(() => injector.close())
  t.equal(
    await runCheck({ WRITEGATE_HEALTH_URL: `https://127.0.0.1:${port}/healthz` }),
    0,
    'injector healthy',
  )
  await injector.close()
  t.equal(
    await runCheck({ WRITEGATE_HEALTH_URL: `https://127.0.0.1:${port}/healthz` }),
    1,
    'nothing listening',
  )
})
