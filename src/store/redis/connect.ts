import { Redis } from 'ioredis'

export interface RedisOptions {
  url: string
  /** Prepended to every key (outside the `{tenant}` hash tag), so several deployments can share a server. */
  keyPrefix: string
}

/**
 * A command connection. Commands fail fast instead of queueing while Redis is down:
 * the gate must answer 503 at once, not hang (fail closed).
 */
export function connectRedis(opts: RedisOptions, role: 'commands' | 'subscriber' = 'commands'): Redis {
  return new Redis(opts.url, {
    lazyConnect: true,
    // A subscriber may queue its SUBSCRIBE until connected; commands must fail fast.
    enableOfflineQueue: role === 'subscriber',
    maxRetriesPerRequest: 1,
    connectTimeout: 2000,
    commandTimeout: 2000,
    retryStrategy: (times) => Math.min(times * 100, 1000),
  })
}
