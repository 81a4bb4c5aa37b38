import type { RateLimitStore } from '../ports/rate-limit.js'

/** In-process sliding-window log, for the single-process default. */
export function createMemoryRateLimitStore(): RateLimitStore {
  /** Each bucket keeps its own window: a sweep judges it by that, not by the window of whoever hit last. */
  const buckets = new Map<string, { windowMs: number; log: number[] }>()
  let hits = 0
  return {
    async hit(bucket, limit, windowSeconds, nowMs) {
      const windowMs = windowSeconds * 1000
      const log = (buckets.get(bucket)?.log ?? []).filter((t) => t > nowMs - windowMs)
      // Occasional sweep so buckets of clients that went away do not pile up.
      if (++hits % 1000 === 0) {
        for (const [k, b] of buckets) if (b.log.every((t) => t <= nowMs - b.windowMs)) buckets.delete(k)
      }
      if (log.length >= limit) {
        buckets.set(bucket, { windowMs, log })
        const oldest = log[0] as number
        return {
          allowed: false,
          remaining: 0,
          retryAfterSeconds: Math.max(1, Math.ceil((oldest + windowMs - nowMs) / 1000)),
        }
      }
      log.push(nowMs)
      buckets.set(bucket, { windowMs, log })
      return { allowed: true, remaining: limit - log.length, retryAfterSeconds: 0 }
    },
  }
}
