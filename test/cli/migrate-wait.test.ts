import { spawn } from 'node:child_process'
import { createConnection, createServer, type Server } from 'node:net'
import t from 'tap'
import { openTestDatabase } from '../helpers/backends.js'
import { cliEnv, LAUNCHER, ROOT, runCli } from '../helpers/cli.js'
import { TEST_DATABASE_URL } from '../helpers/servers.js'

/**
 * `writegate migrate --wait`: the chart's Job starts while a bundled PostgreSQL is still being
 * created. Without waiting, three quick retries of the Job failed the first `helm install`.
 */
async function freePort(): Promise<number> {
  const s = createServer()
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r))
  const { port } = s.address() as { port: number }
  await new Promise((r) => s.close(r))
  return port
}

/** A TCP relay to the test server, opened late: the database "comes up" at that moment. */
function relayTo(port: number, upstream: URL): Promise<Server> {
  const server = createServer((client) => {
    const pg = createConnection(Number(upstream.port || 5432), upstream.hostname)
    client.pipe(pg).pipe(client)
    client.on('error', () => pg.destroy())
    pg.on('error', () => client.destroy())
  })
  return new Promise((resolve) => server.listen(port, '127.0.0.1', () => resolve(server)))
}

const logLines = (stdout: string) =>
  stdout
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as { msg: string; code?: string })

t.test('a server that comes up while migrate waits is migrated', async (t) => {
  const db = await openTestDatabase('postgres', { migrate: false })
  t.teardown(() => db.close())
  const port = await freePort()
  const url = new URL(db.url as string)
  url.port = String(port)
  let relay: Promise<Server> | undefined
  t.teardown(async () => (await relay)?.close())
  // The database "comes up" once migrate has said it is waiting for it (not after some time:
  // a slow start of the command would otherwise find it up already).
  const child = spawn(process.execPath, [LAUNCHER, 'migrate', '--wait', '120'], {
    cwd: ROOT,
    env: cliEnv({ WRITEGATE_DATABASE_URL: url.toString() }),
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (d) => {
    stdout += d
    if (!relay && stdout.includes('not up yet')) relay = relayTo(port, new URL(TEST_DATABASE_URL))
  })
  child.stderr.on('data', (d) => {
    stderr += d
  })
  const code = await new Promise<number | null>((resolve) => child.once('close', resolve))
  t.equal(code, 0, stderr)
  const lines = logLines(stdout)
  t.ok(
    lines.some((l) => l.msg.includes('not up yet') && l.code === 'ECONNREFUSED'),
    'it said it was waiting',
  )
  t.ok(
    lines.some((l) => l.msg === 'migrations applied'),
    'then migrated',
  )
  const versions = await db.db.sql`select version from schema_migrations`
  t.ok(versions.length > 0, 'the migrations are in the database')
})

t.test('it gives up when --wait is over, naming the setting', async (t) => {
  const port = await freePort()
  const r = await runCli(['migrate', '--wait', '1'], {
    env: { WRITEGATE_DATABASE_URL: `postgres://postgres@127.0.0.1:${port}/test` },
  })
  t.equal(r.code, 1)
  t.match(
    r.stderr,
    /^writegate: invalid setting database\.url \(WRITEGATE_DATABASE_URL\): cannot connect \(ECONNREFUSED\)$/,
  )
})

t.test('a server that answers with a refusal is not waited for', async (t) => {
  const url = new URL(TEST_DATABASE_URL)
  url.pathname = '/wgt_no_such_database'
  const r = await runCli(['migrate', '--wait', '60'], { env: { WRITEGATE_DATABASE_URL: url.toString() } })
  t.equal(r.code, 1)
  t.match(r.stderr, /database "wgt_no_such_database" does not exist/)
  t.notOk(r.stdout.includes('not up yet'), 'no retry')
})

t.test('--wait takes whole seconds, 0 to 3600', async (t) => {
  for (const bad of ['1.5', 'soon', '3601', '']) {
    const r = await runCli(['migrate', '--wait', bad], { env: { WRITEGATE_DATABASE_URL: TEST_DATABASE_URL } })
    t.equal(r.code, 2, bad)
    t.match(r.stderr, /--wait must be a whole number of seconds, 0 to 3600/, bad)
  }
})
