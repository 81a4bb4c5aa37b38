import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Redis } from 'ioredis'
import postgres from 'postgres'
import t from 'tap'
import { randomBase62 } from '../../src/core/random.js'
import { openTestDatabase } from '../helpers/backends.js'
import { inPairs, ROOT as root, runCli } from '../helpers/cli.js'
import { PrivateRedis } from '../helpers/redis-server.js'
import { TEST_DATABASE_URL } from '../helpers/servers.js'

const run = (args: string[], env: Record<string, string>) => runCli(args, { env })

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
    // Set but empty is not "the default": it is a mistake, named.
    [
      { WRITEGATE_PORT: '' },
      /^writegate: invalid setting server\.port \(WRITEGATE_PORT\): the variable is set but empty \(unset it/,
    ],
    [
      { WRITEGATE_TRUST_PROXY: 'not-an-ip' },
      /^writegate: invalid setting server\.trustProxy\.0 \(WRITEGATE_TRUST_PROXY\): expected .*, got "not-an-ip"$/,
    ],
  ]
  await inPairs(cases, async ([env, pattern]) => {
    const r = await run(['start'], { WRITEGATE_DATA_DIR: mkdtempSync(join(tmpdir(), 'wg-cli-')), ...env })
    t.equal(r.code, 1, JSON.stringify(env))
    t.match(r.stderr, pattern)
    t.equal(r.stderr.split('\n').length, 1, `one line: ${r.stderr}`)
  })
})

t.test('an unreachable Redis at start is named first, in one line, with its cause', async (t) => {
  const cases = [
    ['redis://127.0.0.1:1', 'ECONNREFUSED'],
    // EAI_AGAIN where the machine has no resolver at all, ETIMEDOUT where it answers slowly.
    ['redis://no-such-host.invalid:6379', '(ENOTFOUND|EAI_AGAIN|ETIMEDOUT)'],
  ] as const
  await inPairs(cases, async ([url, cause]) => {
    // The embedded database under this directory cannot be opened either: Redis is tried first,
    // so a wrong URL is named before an initdb or a migration has run. (One directory per
    // process: each writes its generated keys there first.)
    const broken = mkdtempSync(join(tmpdir(), 'wg-cli-'))
    writeFileSync(join(broken, 'pgdata'), '')
    const redis = await run(['start'], {
      WRITEGATE_DATA_DIR: broken,
      WRITEGATE_REDIS_URL: url,
      WRITEGATE_PORT: '0',
    })
    t.equal(redis.code, 1)
    t.match(
      redis.stderr,
      new RegExp(
        `^writegate: invalid setting redis\\.url \\(WRITEGATE_REDIS_URL\\): cannot connect \\(${cause}\\)$`,
      ),
      'the socket\'s own error, not the client library\'s "Connection is closed."',
    )
    t.equal(redis.stdout, '', 'nothing else is printed')
  })
})

// Found in review: Node's recursive mkdir never returns for a directory /proc refuses (ENOENT
// from a parent that exists), and start-up hung with no output.
t.test('a data directory that cannot be created stops start-up in one line', async (t) => {
  const r = await run(['start'], { WRITEGATE_DATA_DIR: '/proc/wg-no-such-dir', WRITEGATE_PORT: '0' })
  t.equal(r.code, 1)
  t.match(r.stderr, /^writegate: invalid setting dataDir \(WRITEGATE_DATA_DIR\): .*\(?ENOENT\)?$/)
  t.equal(r.stderr.split('\n').length, 1, `one line: ${r.stderr}`)
})

t.test('a database that cannot be opened names the setting in use: dataDir when embedded', async (t) => {
  // The embedded PGlite directory (<dataDir>/pgdata) is a regular file.
  const fileDir = mkdtempSync(join(tmpdir(), 'wg-cli-'))
  writeFileSync(join(fileDir, 'pgdata'), '')
  // The embedded PGlite directory is locked by a live process (this one).
  const lockedDir = mkdtempSync(join(tmpdir(), 'wg-cli-'))
  mkdirSync(join(lockedDir, 'pgdata'))
  writeFileSync(join(lockedDir, 'pgdata', 'writegate.lock'), String(process.pid))
  const cases = [
    ['start', fileDir, /\(EEXIST\)$/],
    ['start', lockedDir, new RegExp(`in use by process ${process.pid}\\)$`)],
    // `writegate migrate` opens the same database, and blames the same setting.
    ['migrate', fileDir, /\(EEXIST\)$/],
    ['migrate', lockedDir, new RegExp(`in use by process ${process.pid}\\)$`)],
  ] as const
  await inPairs(cases, async ([command, dir, detail]) => {
    const r = await run([command], { WRITEGATE_DATA_DIR: dir, WRITEGATE_PORT: '0' })
    t.equal(r.code, 1, `${command} ${dir}`)
    t.match(
      r.stderr,
      /^writegate: invalid setting dataDir \(WRITEGATE_DATA_DIR\): cannot open the embedded database/,
    )
    t.match(r.stderr, detail)
    t.notMatch(r.stderr, /database\.url/, 'no URL is set, so none is blamed')
    t.equal(r.stderr.split('\n').length, 1, `one line: ${r.stderr}`)
  })

  // The data directory itself a file, or its generated master key unreadable: dataDir is named too.
  const notADir = join(mkdtempSync(join(tmpdir(), 'wg-cli-')), 'a-file')
  writeFileSync(notADir, '')
  const corrupt = mkdtempSync(join(tmpdir(), 'wg-cli-'))
  writeFileSync(join(corrupt, 'master.key'), 'not a key')
  for (const [dir, detail] of [
    [notADir, /cannot use the generated master key .*a-file\/master\.key: (ENOTDIR|EEXIST)$/],
    [corrupt, /cannot use the generated master key .*master\.key: expected 32 bytes/],
  ] as const) {
    const r = await run(['start'], { WRITEGATE_DATA_DIR: dir, WRITEGATE_PORT: '0' })
    t.equal(r.code, 1, dir)
    t.match(r.stderr, /^writegate: invalid setting dataDir \(WRITEGATE_DATA_DIR\): /)
    t.match(r.stderr, detail)
    t.equal(r.stderr.split('\n').length, 1, `one line: ${r.stderr}`)
  }

  // With a URL set, the URL is what is blamed.
  const keys = mkdtempSync(join(tmpdir(), 'wg-cli-'))
  t.equal((await run(['keygen', join(keys, 'master.key')], {})).code, 0)
  t.equal((await run(['audit-keygen', join(keys, 'audit.key')], {})).code, 0)
  const url = await run(['start'], {
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
  const r = await run(['migrate'], {
    WRITEGATE_DATA_DIR: mkdtempSync(join(tmpdir(), 'wg-cli-')),
    WRITEGATE_DATABASE_URL: 'postgres://127.0.0.1:1/none',
  })
  t.equal(r.code, 1)
  t.equal(
    r.stderr,
    'writegate: invalid setting database.url (WRITEGATE_DATABASE_URL): cannot connect (ECONNREFUSED)',
  )
})

t.test(
  "a Postgres server's refusal is quoted and blamed on database.url, never echoing the password",
  async (t) => {
    const missing = `wg_missing_${randomBase62(8).toLowerCase()}`
    const server = new URL(TEST_DATABASE_URL)
    const url = (user: string, database: string) => `postgres://${user}:hunter2@${server.host}/${database}`
    const role = `wg_role_${randomBase62(8).toLowerCase()}`
    // A role that may log in but not create anything in a fresh database (PostgreSQL 15+).
    const admin = postgres(TEST_DATABASE_URL, { max: 1, onnotice: () => {} })
    const fresh = await openTestDatabase('postgres', { migrate: false })
    await admin.unsafe(`create role ${role} login`)
    t.teardown(async () => {
      await fresh.close()
      await admin.unsafe(`drop role if exists ${role}`)
      await admin.end({ timeout: 1 })
    })
    const freshName = new URL(fresh.url as string).pathname.slice(1)
    const cases: [string, string][] = [
      [url(server.username || 'postgres', missing), `cannot connect: database "${missing}" does not exist`],
      [url(`${role}_nobody`, freshName), `cannot connect: role "${role}_nobody" does not exist`],
      [url(role, freshName), 'cannot apply the migrations: permission denied for schema public'],
    ]
    await inPairs(cases, async ([databaseUrl, detail]) => {
      const r = await run(['migrate'], {
        WRITEGATE_DATA_DIR: mkdtempSync(join(tmpdir(), 'wg-cli-')),
        WRITEGATE_DATABASE_URL: databaseUrl,
      })
      t.equal(r.code, 1)
      t.equal(r.stderr, `writegate: invalid setting database.url (WRITEGATE_DATABASE_URL): ${detail}`)
      t.notMatch(r.stderr + r.stdout, /hunter2/)
    })
  },
)

t.test('the proxy: an API key variable that is set but empty is named, not taken as no key', async (t) => {
  const r = await run(['proxy'], {
    WRITEGATE_REDIS_URL: 'redis://127.0.0.1:1',
    WRITEGATE_ROUTES_FILE: join(root, 'config', 'systems.example.yaml'),
    BILLING_API_TOKEN: 'x',
    WRITEGATE_PROXY_API_KEY: '',
  })
  t.equal(r.code, 1)
  t.equal(
    r.stderr,
    'writegate: invalid setting WRITEGATE_PROXY_API_KEY: the variable is set but empty (unset it to use the settings file or the default)',
  )
})

t.test('unknown commands and help', async (t) => {
  const bad = await run(['frobnicate'], {})
  t.equal(bad.code, 2)
  t.equal(bad.stderr, 'writegate: unknown command "frobnicate" (try: writegate help)')
  const help = await run(['help'], {})
  t.equal(help.code, 0)
  t.match(help.stdout, /Usage: writegate <command>/)
})

t.test('migrate applies migrations to the embedded default', async (t) => {
  const r = await run(['migrate'], {
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
  await inPairs(cases, async ([env, pattern]) => {
    const r = await run(['injector'], env)
    t.equal(r.code, 1, JSON.stringify(env))
    t.match(r.stderr, pattern)
    t.equal(r.stderr.split('\n').length, 1, `one line: ${r.stderr}`)
  })
  const help = await run(['help'], {})
  t.match(help.stdout, /^ {2}injector +run the Kubernetes admission webhook/m)
})

t.test('a Redis that may evict keys stops start-up with one line naming the policy', async (t) => {
  const server = new PrivateRedis()
  await server.start()
  t.teardown(() => server.kill())
  const admin = new Redis(server.url)
  t.teardown(() => admin.disconnect())
  const start = () =>
    run(['start'], {
      WRITEGATE_DATA_DIR: mkdtempSync(join(tmpdir(), 'wg-cli-')),
      WRITEGATE_REDIS_URL: server.url,
      WRITEGATE_PORT: '0',
    })
  // A managed Redis's usual default: keys with a TTL (grant markers, quota counters) may go.
  await admin.config('SET', 'maxmemory-policy', 'volatile-lru')
  const refused = await start()
  t.equal(refused.code, 1)
  t.match(
    refused.stderr,
    /^writegate: invalid setting redis\.url \(WRITEGATE_REDIS_URL\): the server's maxmemory-policy is volatile-lru; writegate needs noeviction/,
  )
  t.equal(refused.stderr.split('\n').length, 1, 'one line')
})
