import { Redis } from 'ioredis'
import type { Test } from 'tap'
import { randomBase62 } from '../../src/core/random.js'
import { connectRedis } from '../../src/store/redis/connect.js'
import { createRedisHotStore } from '../../src/store/redis/hot-store.js'
import { TEST_REDIS_URL, unreachable } from './servers.js'

export interface TestRedis {
  redis: Redis
  url: string
  /** A key prefix no other test uses; every key under it is deleted on close. */
  prefix: string
  close(): Promise<void>
}

export async function openTestRedis(): Promise<TestRedis> {
  const redis = new Redis(TEST_REDIS_URL, {
    lazyConnect: true,
    maxRetriesPerRequest: 1,
    connectTimeout: 3000,
  })
  try {
    await redis.connect()
  } catch (err) {
    redis.disconnect()
    throw unreachable('Redis', TEST_REDIS_URL, err)
  }
  const prefix = `wgt:${randomBase62(10)}:`
  return {
    redis,
    url: TEST_REDIS_URL,
    prefix,
    async close() {
      let cursor = '0'
      do {
        const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 500)
        if (keys.length > 0) await redis.del(...keys)
        cursor = next
      } while (cursor !== '0')
      await redis.quit()
    },
  }
}

/** A Redis hot store under a fresh key prefix, closed (and its keys deleted) at teardown. */
export async function openRedisHotStore(t: Test, opts: { nowSeconds: () => number; claimIdleMs?: number }) {
  const tr = await openTestRedis()
  const connection = { url: tr.url, keyPrefix: tr.prefix }
  const redis = connectRedis(connection)
  const subscriber = connectRedis(connection, 'subscriber')
  await redis.connect()
  await subscriber.connect()
  const hot = createRedisHotStore({
    redis,
    subscriber,
    keyPrefix: tr.prefix,
    nowSeconds: opts.nowSeconds,
    ...(opts.claimIdleMs === undefined ? {} : { claimIdleMs: opts.claimIdleMs }),
  })
  t.teardown(async () => {
    await hot.close()
    redis.disconnect()
    subscriber.disconnect()
    await tr.close()
  })
  return { tr, redis, hot }
}

/**
 * Whether some connection is subscribed to a channel matching `pattern` (a PUBSUB glob), on any
 * of `nodes`: PUBSUB SHARDCHANNELS for shard channels (SSUBSCRIBE), CHANNELS for classic ones.
 * How a test sees a subscription land on the server instead of sleeping on it; each node only
 * knows its own subscribers, so a cluster is asked node by node.
 */
export async function subscribed(
  nodes: Pick<Redis, 'call'>[],
  pattern: string,
  kind: 'shard' | 'classic',
): Promise<boolean> {
  for (const node of nodes) {
    const channels = (await node.call(
      'PUBSUB',
      kind === 'shard' ? 'SHARDCHANNELS' : 'CHANNELS',
      pattern,
    )) as string[]
    if (channels.length > 0) return true
  }
  return false
}
