import { spawnSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'

const root = join(import.meta.dirname, '..', '..')

function run(args: string[], env: Record<string, string>) {
  const r = spawnSync(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', ...args], {
    cwd: root,
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '',
      WRITEGATE_CONFIG: join(root, 'config', 'writegate.yaml'),
      ...env,
    },
    encoding: 'utf8',
    timeout: 60_000,
  })
  return { code: r.status, stderr: r.stderr.trim(), stdout: r.stdout.trim() }
}

t.test('a bad setting stops start-up with exactly one line naming it', async (t) => {
  const cases: [Record<string, string>, RegExp][] = [
    [{ WRITEGATE_PORT: 'eighty' }, /^writegate: invalid setting server\.port \(WRITEGATE_PORT\)/],
    [
      { WRITEGATE_DATABASE_URL: 'postgres://127.0.0.1:5432/test' },
      /^writegate: invalid setting secrets\.masterKeyFile \(WRITEGATE_MASTER_KEY_FILE\): required when database\.url/,
    ],
    [
      { WRITEGATE_MASTER_KEY_FILE: '/nonexistent/key', WRITEGATE_DATABASE_URL: 'memory://' },
      /^writegate: invalid setting secrets\.masterKeyFile \(WRITEGATE_MASTER_KEY_FILE\): \/nonexistent\/key: /,
    ],
    [{ WRITEGATE_CONFIG: '/nonexistent.yaml' }, /^writegate: invalid setting WRITEGATE_CONFIG/],
  ]
  for (const [env, pattern] of cases) {
    const r = run(['start'], { WRITEGATE_DATA_DIR: mkdtempSync(join(tmpdir(), 'wg-cli-')), ...env })
    t.equal(r.code, 1, JSON.stringify(env))
    t.match(r.stderr, pattern)
    t.equal(r.stderr.split('\n').length, 1, `one line: ${r.stderr}`)
  }
})

t.test('an unreachable Redis or database at start names the setting, in one line', async (t) => {
  const redis = run(['start'], {
    WRITEGATE_DATABASE_URL: 'memory://',
    WRITEGATE_REDIS_URL: 'redis://127.0.0.1:1',
    WRITEGATE_PORT: '0',
  })
  t.equal(redis.code, 1)
  t.match(redis.stderr, /^writegate: invalid setting redis\.url \(WRITEGATE_REDIS_URL\): cannot connect/)
  t.equal(redis.stderr.split('\n').length, 1)
  t.equal(redis.stdout, '', 'nothing else is printed')
})

t.test('a database that cannot be opened names the setting in use: dataDir when embedded', async (t) => {
  // The embedded PGlite directory (<dataDir>/pgdata) is a regular file.
  const fileDir = mkdtempSync(join(tmpdir(), 'wg-cli-'))
  writeFileSync(join(fileDir, 'pgdata'), '')
  // The embedded PGlite directory is locked by a live process (this one).
  const lockedDir = mkdtempSync(join(tmpdir(), 'wg-cli-'))
  mkdirSync(join(lockedDir, 'pgdata'))
  writeFileSync(join(lockedDir, 'pgdata', 'writegate.lock'), String(process.pid))
  for (const [command, dir, detail] of [
    ['start', fileDir, /\(EEXIST\)$/],
    ['start', lockedDir, new RegExp(`in use by process ${process.pid}\\)$`)],
    // `writegate migrate` opens the same database, and blames the same setting.
    ['migrate', fileDir, /\(EEXIST\)$/],
    ['migrate', lockedDir, new RegExp(`in use by process ${process.pid}\\)$`)],
  ] as const) {
    const r = run([command], { WRITEGATE_DATA_DIR: dir, WRITEGATE_PORT: '0' })
    t.equal(r.code, 1, `${command} ${dir}`)
    t.match(
      r.stderr,
      /^writegate: invalid setting dataDir \(WRITEGATE_DATA_DIR\): cannot open the embedded database/,
    )
    t.match(r.stderr, detail)
    t.notMatch(r.stderr, /database\.url/, 'no URL is set, so none is blamed')
    t.equal(r.stderr.split('\n').length, 1, `one line: ${r.stderr}`)
  }

  // With a URL set, the URL is what is blamed.
  const keys = mkdtempSync(join(tmpdir(), 'wg-cli-'))
  t.equal(run(['keygen', join(keys, 'master.key')], {}).code, 0)
  t.equal(run(['audit-keygen', join(keys, 'audit.key')], {}).code, 0)
  const url = run(['start'], {
    WRITEGATE_DATA_DIR: fileDir,
    WRITEGATE_DATABASE_URL: 'postgres://127.0.0.1:1/none',
    WRITEGATE_MASTER_KEY_FILE: join(keys, 'master.key'),
    WRITEGATE_AUDIT_SIGNING_KEY_FILE: join(keys, 'audit.key'),
    WRITEGATE_PORT: '0',
  })
  t.equal(url.code, 1)
  t.match(
    url.stderr,
    /^writegate: invalid setting database\.url \(WRITEGATE_DATABASE_URL\): cannot connect \(ECONNREFUSED\)$/,
  )
  t.equal(url.stderr.split('\n').length, 1, `one line: ${url.stderr}`)
})

t.test('an unreachable database at migrate names the setting, in one line', async (t) => {
  const r = run(['migrate'], {
    WRITEGATE_DATA_DIR: mkdtempSync(join(tmpdir(), 'wg-cli-')),
    WRITEGATE_DATABASE_URL: 'postgres://127.0.0.1:1/none',
  })
  t.equal(r.code, 1)
  t.equal(
    r.stderr,
    'writegate: invalid setting database.url (WRITEGATE_DATABASE_URL): cannot connect (ECONNREFUSED)',
  )
})

t.test('unknown commands and help', async (t) => {
  const bad = run(['frobnicate'], {})
  t.equal(bad.code, 1)
  t.equal(bad.stderr, 'writegate: unknown command "frobnicate" (try: writegate help)')
  const help = run(['help'], {})
  t.equal(help.code, 0)
  t.match(help.stdout, /Usage: writegate <command>/)
})

t.test('migrate applies migrations to the embedded default', async (t) => {
  const r = run(['migrate'], {
    WRITEGATE_DATA_DIR: mkdtempSync(join(tmpdir(), 'wg-cli-')),
    WRITEGATE_LOG_LEVEL: 'info',
  })
  t.equal(r.code, 0, r.stderr)
  t.match(r.stdout, /"msg":"migrations applied"/)
  t.match(r.stdout, /"storage":"pglite-disk"/)
})

t.test('the injector: a bad setting or a missing certificate is one line', async (t) => {
  const cases: [Record<string, string>, RegExp][] = [
    [
      { WRITEGATE_INJECTOR_PORT: '99999' },
      /^writegate: invalid setting injector\.port \(WRITEGATE_INJECTOR_PORT\)/,
    ],
    [
      { WRITEGATE_INJECTOR_TLS_CERT_FILE: '/nonexistent/tls.crt' },
      /^writegate: invalid setting injector\.tls\.certFile \(WRITEGATE_INJECTOR_TLS_CERT_FILE\): cannot read \/nonexistent\/tls\.crt: ENOENT$/,
    ],
  ]
  for (const [env, pattern] of cases) {
    const r = run(['injector'], env)
    t.equal(r.code, 1, JSON.stringify(env))
    t.match(r.stderr, pattern)
    t.equal(r.stderr.split('\n').length, 1, `one line: ${r.stderr}`)
  }
  const help = run(['help'], {})
  t.match(help.stdout, /^ {2}injector +run the Kubernetes admission webhook/m)
})
