import type { RateLimitStore } from '../ports/rate-limit.js'

/** In-process sliding-window log, for the single-process default. */
export function createMemoryRateLimitStore(): RateLimitStore {
  const buckets = new Map<string, number[]>()
  let hits = 0
  return {
    async hit(bucket, limit, windowSeconds, nowMs) {
      const windowMs = windowSeconds * 1000
      const log = (buckets.get(bucket) ?? []).filter((t) => t > nowMs - windowMs)
      // Occasional sweep so buckets of clients that went away do not pile up.
      if (++hits % 1000 === 0) {
        for (const [k, v] of buckets) if (v.every((t) => t <= nowMs - windowMs)) buckets.delete(k)
      }
      if (log.length >= limit) {
        buckets.set(bucket, log)
        const oldest = log[0] as number
        return {
          allowed: false,
          remaining: 0,
          retryAfterSeconds: Math.max(1, Math.ceil((oldest + windowMs - nowMs) / 1000)),
        }
      }
      log.push(nowMs)
      buckets.set(bucket, log)
      return { allowed: true, remaining: limit - log.length, retryAfterSeconds: 0 }
    },
  }
}
