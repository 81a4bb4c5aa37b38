export interface RateLimitVerdict {
  allowed: boolean
  /** Hits left in the window after this one. */
  remaining: number
  /** Seconds until the next hit would be allowed (0 when allowed). */
  retryAfterSeconds: number
}

/**
 * Sliding-window log: at most `limit` hits in any `windowSeconds`. Refused hits are not
 * recorded, so a client that keeps hammering is let back in once old hits age out.
 * Shared by every replica when backed by Redis, so a limit holds across the fleet.
 */
export interface RateLimitStore {
  hit(bucket: string, limit: number, windowSeconds: number, nowMs: number): Promise<RateLimitVerdict>
}
