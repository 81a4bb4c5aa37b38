import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Redis } from 'ioredis'
import t from 'tap'
import { randomBase62 } from '../../src/core/random.js'
import { connectOnce, connectRedis, type RedisClient } from '../../src/store/redis/connect.js'
import { runCli } from '../helpers/cli.js'
import { capturingLogger, LOG_LEVEL } from '../helpers/proxy.js'
import { PrivateRedis } from '../helpers/redis-server.js'
import { TEST_REDIS_URL } from '../helpers/servers.js'

// The database a Redis URL names (redis://host:6379/3) is the one used, or none is: a server
// that refuses it must not be used in database 0, which another deployment may be using.

const PASSWORD = `pw-${randomBase62(12)}`

/** The database a connection is on, as the server sees it. */
async function dbOf(redis: RedisClient): Promise<string | undefined> {
  const info = (await (redis as Redis).client('INFO')) as string
  return /\bdb=(\d+)/.exec(info)?.[1]
}

async function waitFor(what: string, ok: () => Promise<boolean> | boolean, ms = 10_000): Promise<void> {
  const until = Date.now() + ms
  while (!(await ok())) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

t.test(
  'writegate start refuses a database the server does not have, in one line naming the setting',
  async (t) => {
    const r = await runCli(['start'], {
      env: {
        WRITEGATE_DATA_DIR: mkdtempSync(join(tmpdir(), 'wg-cli-')),
        WRITEGATE_REDIS_URL: `${TEST_REDIS_URL}/99`,
        WRITEGATE_PORT: '0',
      },
    })
    t.equal(r.code, 1)
    t.match(
      r.stderr,
      /^writegate: invalid setting redis\.url \(WRITEGATE_REDIS_URL\): cannot connect: the server refused database 99 \(ERR DB index is out of range\)$/,
    )
    t.equal(r.stdout, '', 'nothing else is printed')
  },
)

t.test('writegate proxy refuses it too: a bad setting, not an outage to wait out', async (t) => {
  const r = await runCli(['proxy'], {
    env: {
      WRITEGATE_REDIS_URL: `${TEST_REDIS_URL}/99`,
      WRITEGATE_PROXY_API_KEY: 'wg_live_not_checked_before_redis',
      WRITEGATE_PORT: '0',
    },
  })
  t.equal(r.code, 1)
  t.match(
    r.stderr,
    /^writegate: invalid setting redis\.url \(WRITEGATE_REDIS_URL\): cannot connect: the server refused database 99 \(ERR DB index is out of range\)$/,
  )
})

t.test('a database the URL names is the one written, and again after a restart', async (t) => {
  const prefix = `wgt:${randomBase62(10)}:`
  const admin = new Redis(TEST_REDIS_URL)
  t.teardown(() => admin.disconnect())
  const redis = connectRedis({ url: `${TEST_REDIS_URL}/3`, keyPrefix: prefix })
  t.teardown(() => redis.disconnect())
  await connectOnce(redis)
  t.equal(await dbOf(redis), '3')
  await redis.set(`${prefix}k`, 'in-3')
  t.equal(await admin.get(`${prefix}k`), null, 'not in database 0')
  await admin.select(3)
  t.equal(await admin.get(`${prefix}k`), 'in-3', 'in database 3')
  await admin.del(`${prefix}k`)

  // A restart: ioredis selects the URL's database again on the new connection.
  const server = new PrivateRedis()
  await server.start()
  t.teardown(() => server.kill())
  const own = connectRedis({ url: `${server.url}/3`, keyPrefix: prefix })
  t.teardown(() => own.disconnect())
  await connectOnce(own)
  await own.set(`${prefix}before`, '1')
  await server.kill()
  await waitFor('the client to see the restart', () => own.status !== 'ready')
  await server.start()
  await waitFor('the client to reconnect', () => own.status === 'ready')
  t.equal(await dbOf(own), '3', 'the new connection is on database 3')
  await own.set(`${prefix}after`, '1')
  const check = new Redis(server.url)
  t.teardown(() => check.disconnect())
  t.same(await check.keys('*'), [], 'nothing in database 0')
  await check.select(3)
  t.same((await check.keys('*')).sort(), [`${prefix}after`, `${prefix}before`])
})

t.test('a refused database is never used in database 0, nor its password printed', async (t) => {
  const server = new PrivateRedis()
  await server.start()
  t.teardown(() => server.kill())
  const admin = new Redis(server.url)
  t.teardown(() => admin.disconnect())
  await admin.config('SET', 'requirepass', PASSWORD)
  await admin.auth(PASSWORD)
  const url = `redis://:${PASSWORD}@127.0.0.1:${server.port}/99`

  // writegate start: one line, without the password.
  const r = await runCli(['start'], {
    env: {
      WRITEGATE_DATA_DIR: mkdtempSync(join(tmpdir(), 'wg-cli-')),
      WRITEGATE_REDIS_URL: url,
      WRITEGATE_PORT: '0',
    },
  })
  t.equal(r.code, 1)
  t.match(
    r.stderr,
    /^writegate: invalid setting redis\.url \(WRITEGATE_REDIS_URL\): cannot connect: the server refused database 99 \(ERR DB index is out of range\)$/,
  )
  t.notMatch(`${r.stdout}${r.stderr}`, PASSWORD)

  // The proxy connects without waiting on a start-up: its connections never become ready, so
  // its commands fail (the gate answers 503), a subscriber's queued commands are never sent,
  // and the refusal is logged (it will not go away by itself).
  const { logger, lines } = capturingLogger()
  const commands = connectRedis({ url, keyPrefix: 'wg:' }, 'commands', logger)
  const subscriber = connectRedis({ url, keyPrefix: 'wg:' }, 'subscriber', logger)
  t.teardown(() => {
    commands.disconnect()
    subscriber.disconnect()
  })
  await t.rejects(commands.connect())
  subscriber.connect().catch(() => {})
  const queued = subscriber.set('wg:queued', 'x').catch(() => 'failed')
  await t.rejects(commands.set('wg:k', 'x'))
  await waitFor('the refusal to be logged', () => lines.some((l) => l.level === LOG_LEVEL.error))
  // Several reconnects later, still nothing anywhere.
  await new Promise((r) => setTimeout(r, 1500))
  t.not(commands.status, 'ready')
  t.not(subscriber.status, 'ready')
  t.same(await admin.keys('*'), [], 'nothing written in database 0')
  const refusal = lines.find((l) => l.level === LOG_LEVEL.error)
  t.match(refusal?.msg, /^Redis refused database 99, which redis\.url \(WRITEGATE_REDIS_URL\) names/)
  t.notMatch(JSON.stringify(lines), PASSWORD)
  subscriber.disconnect()
  t.equal(await queued, 'failed')
})

t.test('a Redis that refuses SELECT itself (a managed one) is refused at start-up', async (t) => {
  const server = new PrivateRedis()
  await server.start()
  t.teardown(() => server.kill())
  const admin = new Redis(server.url)
  t.teardown(() => admin.disconnect())
  await admin.call('ACL', 'SETUSER', 'app', 'on', `>${PASSWORD}`, '~*', '&*', '+@all', '-select')
  const redis = connectRedis({ url: `redis://app:${PASSWORD}@127.0.0.1:${server.port}/2`, keyPrefix: 'wg:' })
  t.teardown(() => redis.disconnect())
  const err = await connectOnce(redis).then(
    () => null,
    (e: Error) => e,
  )
  t.equal(err?.name, 'ReplyError')
  t.match(err?.message, /^the server refused database 2 \(NOPERM /)
  t.notMatch(err?.message, PASSWORD)
  // Database 0 needs no SELECT: the same server and user work there.
  const zero = connectRedis({ url: `redis://app:${PASSWORD}@127.0.0.1:${server.port}`, keyPrefix: 'wg:' })
  t.teardown(() => zero.disconnect())
  await connectOnce(zero)
  t.equal(await zero.ping(), 'PONG')
})

t.test('a database a URL cannot name is refused before connecting', async (t) => {
  const setting = /^invalid setting redis\.url \(WRITEGATE_REDIS_URL\): /
  for (const url of ['redis://127.0.0.1:7000/3', 'redis://127.0.0.1:7000?db=3']) {
    t.throws(() => connectRedis({ url, keyPrefix: 'wg:', cluster: true }), {
      name: 'ConfigError',
      message:
        /^invalid setting redis\.url \(WRITEGATE_REDIS_URL\): it names database 3, but a Redis Cluster has only database 0/,
    })
  }
  for (const url of [
    'redis://:secret@127.0.0.1:6379/abc',
    'redis://127.0.0.1:6379/3/x',
    'redis://127.0.0.1:6379?db=two',
  ]) {
    let err: Error | undefined
    try {
      connectRedis({ url, keyPrefix: 'wg:' })
    } catch (e) {
      err = e as Error
    }
    t.equal(err?.name, 'ConfigError', url)
    t.match(err?.message, setting)
    t.notMatch(err?.message, 'secret')
  }
  // Database 0, named or not, is fine for a cluster.
  for (const url of ['redis://127.0.0.1:7000', 'redis://127.0.0.1:7000/', 'redis://127.0.0.1:7000/0'])
    connectRedis({ url, keyPrefix: 'wg:', cluster: true }).disconnect()
})
