import t, { type Test } from 'tap'
import { createMemoryRateLimitStore } from '../../src/store/memory/rate-limit-store.js'
import type { RateLimitStore } from '../../src/store/ports/rate-limit.js'
import { createRedisRateLimitStore } from '../../src/store/redis/rate-limit-store.js'
import { openTestRedis } from '../helpers/redis.js'

async function suite(t: Test, store: RateLimitStore) {
  const T0 = 1_800_000_000_000
  for (let i = 0; i < 3; i++) {
    const v = await store.hit('b1', 3, 60, T0 + i * 1000)
    t.same(v, { allowed: true, remaining: 2 - i, retryAfterSeconds: 0 })
  }
  const refused = await store.hit('b1', 3, 60, T0 + 5000)
  t.same(refused, { allowed: false, remaining: 0, retryAfterSeconds: 55 }, 'the oldest hit ages out in 55 s')
  t.equal((await store.hit('b2', 3, 60, T0 + 5000)).allowed, true, 'buckets are independent')
  t.equal((await store.hit('b1', 3, 60, T0 + 60_001)).allowed, true, 'sliding window: one slot freed')
  t.equal((await store.hit('b1', 3, 60, T0 + 60_002)).allowed, false)
  // Concurrency: exactly `limit` of many simultaneous hits get through.
  const many = await Promise.all(Array.from({ length: 50 }, () => store.hit('burst', 10, 60, T0)))
  t.equal(many.filter((v) => v.allowed).length, 10)

  // Found in review: a long window's bucket is kept while its window lasts, however many hits of
  // short windows (an unauthenticated endpoint's) come in between (the memory store's sweep
  // judged every bucket by the window of whoever hit last).
  for (let i = 0; i < 3; i++) await store.hit('long', 3, 600, T0 + i)
  for (let i = 0; i < 2500; i++) await store.hit(`short:${i % 7}`, 1_000_000, 60, T0 + 61_000 + i)
  t.equal(
    (await store.hit('long', 3, 600, T0 + 70_000)).allowed,
    false,
    'still full 70 s into its 600 s window',
  )
}

t.test('rate limits: memory', async (t) => suite(t, createMemoryRateLimitStore()))

t.test('rate limits: real Redis', async (t) => {
  const r = await openTestRedis()
  t.teardown(() => r.close())
  await suite(t, createRedisRateLimitStore(r.redis, r.prefix))
  const keys = await r.redis.keys(`${r.prefix}*`)
  t.ok(keys.length > 0 && keys.every((k) => k.includes('{')), 'keys are hash-tagged')
})
