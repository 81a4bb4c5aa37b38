import type { RateLimitStore } from '../ports/rate-limit.js'
import type { RedisClient } from './connect.js'

/** One atomic script per hit: trim the window, count, and record only when allowed. */
const HIT = `
local key = KEYS[1]
local now = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
local member = ARGV[4]
redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
local n = redis.call('ZCARD', key)
if n >= limit then
  local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  return {0, 0, tonumber(oldest[2]) + window - now}
end
redis.call('ZADD', key, now, member)
redis.call('PEXPIRE', key, window)
return {1, limit - n - 1, 0}
`

export function createRedisRateLimitStore(redis: RedisClient, keyPrefix: string): RateLimitStore {
  let seq = 0
  return {
    async hit(bucket, limit, windowSeconds, nowMs) {
      const windowMs = windowSeconds * 1000
      const member = `${nowMs}:${process.pid}:${++seq}:${Math.random().toString(36).slice(2)}`
      const [allowed, remaining, waitMs] = (await redis.eval(
        HIT,
        1,
        `${keyPrefix}rl:{${bucket}}`,
        nowMs,
        windowMs,
        limit,
        member,
      )) as [number, number, number]
      return {
        allowed: allowed === 1,
        remaining,
        retryAfterSeconds: allowed === 1 ? 0 : Math.max(1, Math.ceil(waitMs / 1000)),
      }
    },
  }
}
