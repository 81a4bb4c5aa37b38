import { Cluster, Redis } from 'ioredis'
import { ConfigError } from '../../config/load.js'
import type { Logger } from '../../observability/logger.js'

/** A connection to one Redis, or to a Redis Cluster: the hot store speaks to either alike. */
export type RedisClient = Redis | Cluster

export interface RedisOptions {
  url: string
  /** Prepended to every key (outside the `{tenant}` hash tag), so several deployments can share a server. */
  keyPrefix: string
  /** `url` is a seed node of a Redis Cluster; every key a command or script names shares one slot. */
  cluster?: boolean
}

const SETTING = 'redis.url (WRITEGATE_REDIS_URL)'

/**
 * The database a URL names, as ioredis reads it: its path (`/3`), else its `db` query parameter,
 * else 0. Anything but a number is refused (ioredis would quietly use database 0).
 */
function urlDatabase(url: URL): number {
  const raw = url.pathname.length > 1 ? url.pathname.slice(1) : (url.searchParams.get('db') ?? '0')
  if (!/^\d+$/.test(raw))
    throw new ConfigError(
      `invalid setting ${SETTING}: its path names a database by number (redis://host:6379/3)`,
    )
  return Number(raw)
}

/** The error of the SELECT ioredis sends on each connection when the URL names a database. */
function refusedSelect(err: Error): boolean {
  return (err as { command?: { name?: string } }).command?.name === 'select'
}

/** Clients a start-up (connectOnce) is connecting: it reports their failure, not the log. */
const startingUp = new WeakSet<RedisClient>()

/**
 * A command connection fails fast instead of queueing while Redis is down: the gate must
 * answer 503 at once, not hang (fail closed). A subscriber may queue its SUBSCRIBE.
 * Connection errors are logged at most every 10 s; ioredis keeps reconnecting.
 */
export function connectRedis(
  opts: RedisOptions,
  role: 'commands' | 'subscriber' = 'commands',
  logger?: Logger,
): RedisClient {
  const common = {
    lazyConnect: true,
    enableOfflineQueue: role === 'subscriber',
    // No auto-pipelining: the hot store batches its commits itself (commit-batcher.ts), and
    // a pipeline per tick only adds work to each of the other commands, which run one at a time.
  }
  const perNode = {
    maxRetriesPerRequest: 1,
    connectTimeout: 2000,
    commandTimeout: 2000,
    // A command sent but unanswered when the connection dropped may have run: a commit (which
    // counts quota, uses a grant and queues receipts) must not run twice. It fails instead
    // (within commandTimeout), and the gate answers 503. A subscriber's SUBSCRIBE is safe to send
    // again, and must be: it may be lost after 'ready' has fired.
    autoResendUnfulfilledCommands: role === 'subscriber',
    // A failover that demotes the server this connection is on (a managed Redis whose name now
    // points at the new primary) answers every write READONLY while PING still answers: connect
    // again, to whatever the URL names now. The command that met it fails (not resent).
    //
    // A server that refuses the database the URL names (an index past its `databases`, or a
    // managed Redis without SELECT) is not used at all: ioredis would only report the refusal and
    // go on in database 0, which another deployment may be using. The connection closes before
    // 'ready' (none of our commands has run on it) and is tried again: commands fail meanwhile (the
    // gate answers 503), and a start-up (connectOnce) fails naming the setting. Each connection,
    // a reconnect after a restart too, selects the URL's database first.
    reconnectOnError: (err: Error) => err.message.startsWith('READONLY') || refusedSelect(err),
  }
  const retry = (times: number) => Math.min(times * 100, 1000)
  let redis: RedisClient
  const seed = new URL(opts.url)
  const db = urlDatabase(seed)
  if (opts.cluster) {
    if (db !== 0)
      throw new ConfigError(
        `invalid setting ${SETTING}: it names database ${db}, but a Redis Cluster has only database 0 (redis.mode is cluster)`,
      )
    redis = new Cluster([{ host: seed.hostname, port: Number(seed.port || 6379) }], {
      ...common,
      clusterRetryStrategy: retry,
      // A command whose connection closed under it is not tried again on another: it may have
      // run (a commit), and running it twice counts quota and uses a grant twice. It fails; the
      // gate answers 503.
      retryDelayOnFailover: 0,
      // Invalidations are sharded channels (one per tenant, in its slot): a subscriber
      // connection per master serves them.
      shardedSubscribers: role === 'subscriber',
      redisOptions: {
        ...perNode,
        ...(seed.username ? { username: decodeURIComponent(seed.username) } : {}),
        ...(seed.password ? { password: decodeURIComponent(seed.password) } : {}),
        ...(seed.protocol === 'rediss:' ? { tls: {} } : {}),
      },
    })
  } else redis = new Redis(opts.url, { ...common, ...perNode, retryStrategy: retry })
  let lastLogged = 0
  // Before the first connection, a failure is the start-up's to report (one line).
  let wasReady = false
  redis.once('ready', () => {
    wasReady = true
  })
  redis.on('error', (err: Error) => {
    // A refused database is logged even before a first connection when no start-up reports it
    // (the proxy starts without Redis): it will not go away by itself.
    const refused = refusedSelect(err)
    if (!wasReady && (!refused || startingUp.has(redis))) return
    const now = Date.now()
    if (now - lastLogged < 10_000) return
    lastLogged = now
    if (refused)
      logger?.error(
        { role, db, reason: err.message },
        `Redis refused database ${db}, which ${SETTING} names; nothing is read or written until it accepts it`,
      )
    else logger?.warn({ err, role }, 'Redis connection problem; retrying')
  })
  return redis
}

/**
 * Connects once, for start-up. A refused or unresolvable server rejects with the socket's own
 * error (ECONNREFUSED, ENOTFOUND), which names the problem, rather than ioredis's "Connection is
 * closed." that follows it. (A Cluster's client keeps its nodes' socket errors to itself: its
 * line says "Connection is closed." for a refused seed, and names an unresolvable one.) A server
 * that refuses the URL's database rejects with its reply, naming the database (never the URL,
 * which may hold a password).
 */
export function connectOnce(redis: RedisClient): Promise<void> {
  let cause: Error | undefined
  const onError = (err: Error) => {
    cause ??= err
  }
  redis.on('error', onError)
  startingUp.add(redis)
  return redis.connect().then(
    () => {
      redis.off('error', onError)
      startingUp.delete(redis)
    },
    (err: Error) => {
      redis.off('error', onError)
      startingUp.delete(redis)
      if (cause && refusedSelect(cause)) {
        const db = (cause as { command?: { args?: unknown[] } }).command?.args?.[0]
        // Named ReplyError as the server's own: the start-up prints `cannot connect: <reply>`.
        const refusal = new Error(`the server refused database ${String(db)} (${cause.message})`)
        refusal.name = 'ReplyError'
        throw refusal
      }
      throw cause ?? err
    },
  )
}
