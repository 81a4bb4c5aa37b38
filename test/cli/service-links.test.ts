import { spawn } from 'node:child_process'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { cliEnv, LAUNCHER, ROOT } from '../helpers/cli.js'

/**
 * `helm install writegate …` makes Services named `writegate` and `writegate-injector`, and
 * Kubernetes gives pods in that namespace `WRITEGATE_PORT=tcp://<ip>:8080` and
 * `WRITEGATE_INJECTOR_PORT=tcp://<ip>:443` (service links). `writegate start` used to stop at
 * once on them ("invalid setting server.port (WRITEGATE_PORT)"); it starts, on the file's ports,
 * and says which variables it left out.
 */
t.test('writegate start with service-link variables starts, and names them once', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'wg-links-'))
  const config = join(dir, 'writegate.yaml')
  writeFileSync(
    config,
    'server:\n  host: 127.0.0.1\n  port: 0\nproxy:\n  host: 127.0.0.1\n  port: 0\nmetrics:\n  host: 127.0.0.1\n  port: 0\n',
  )
  const child = spawn(process.execPath, [LAUNCHER, 'start'], {
    cwd: ROOT,
    env: cliEnv({
      WRITEGATE_CONFIG: config,
      WRITEGATE_DATABASE_URL: 'memory://',
      WRITEGATE_DATA_DIR: dir,
      WRITEGATE_PORT: 'tcp://10.96.0.12:8080',
      WRITEGATE_PORT_8080_TCP_ADDR: '10.96.0.12',
      WRITEGATE_SERVICE_HOST: '10.96.0.12',
      WRITEGATE_INJECTOR_PORT: 'tcp://10.96.0.13:443',
      WRITEGATE_INJECTOR_PORT_443_TCP_PROTO: 'tcp',
      // A typo: without a word, HTTPS interception would stay off.
      WRITEGATE_INJECTOR_TLS_CA_SECRT: 'writegate-ca',
      WRITEGATE_CREDENTIAL_BILLING: 'a secret to inject',
      WRITEGATE_HEALTH_PORT: '8080',
    }),
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve))
  t.teardown(async () => {
    if (child.exitCode === null) {
      child.kill('SIGTERM')
      await exited
    }
  })
  let stdout = ''
  let stderr = ''
  child.stderr.on('data', (d) => {
    stderr += d
  })
  const listening = await new Promise<Record<string, unknown>>((resolve, reject) => {
    child.stdout.on('data', (d) => {
      stdout += d
      const line = stdout.split('\n').find((l) => l.includes('writegate control plane listening'))
      if (line) resolve(JSON.parse(line))
    })
    exited.then((code) => reject(new Error(`exited ${code}: ${stderr}`)))
  })
  t.match(listening.address, /^http:\/\/127\.0\.0\.1:\d+$/, 'listening on the port of the file')
  t.not(listening.address, 'http://127.0.0.1:8080')
  const warnings = stdout
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as { level: number; variables?: string[]; msg: string })
    .filter((l) => l.level >= 40 && l.variables)
  t.equal(warnings.length, 2, 'one line for each')
  t.same(warnings[0]?.variables, ['WRITEGATE_INJECTOR_TLS_CA_SECRT'], 'the typo, not the service links')
  t.match(warnings[0]?.msg, /no setting reads/)
  t.same(warnings[1]?.variables, ['WRITEGATE_PORT', 'WRITEGATE_INJECTOR_PORT'])
  t.match(warnings[1]?.msg, /enableServiceLinks: false/)
  t.equal(stderr, '', 'nothing on stderr')
})
