import { Redis } from 'ioredis'
import type { Logger } from '../../observability/logger.js'

export interface RedisOptions {
  url: string
  /** Prepended to every key (outside the `{tenant}` hash tag), so several deployments can share a server. */
  keyPrefix: string
}

/**
 * A command connection fails fast instead of queueing while Redis is down: the gate must
 * answer 503 at once, not hang (fail closed). A subscriber may queue its SUBSCRIBE.
 * Connection errors are logged at most every 10 s; ioredis keeps reconnecting.
 */
export function connectRedis(
  opts: RedisOptions,
  role: 'commands' | 'subscriber' = 'commands',
  logger?: Logger,
): Redis {
  const redis = new Redis(opts.url, {
    lazyConnect: true,
    enableOfflineQueue: role === 'subscriber',
    maxRetriesPerRequest: 1,
    connectTimeout: 2000,
    commandTimeout: 2000,
    retryStrategy: (times) => Math.min(times * 100, 1000),
    // No auto-pipelining: the hot store batches its commits itself (commit-batcher.ts), and
    // a pipeline per tick only adds work to each of the other commands, which run one at a time.
  })
  let lastLogged = 0
  // Before the first connection, a failure is the start-up's to report (one line).
  let wasReady = false
  redis.once('ready', () => {
    wasReady = true
  })
  redis.on('error', (err: Error) => {
    if (!wasReady) return
    const now = Date.now()
    if (now - lastLogged < 10_000) return
    lastLogged = now
    logger?.warn({ err, role }, 'Redis connection problem; retrying')
  })
  return redis
}
