import t from 'tap'
import { connectRedis } from '../../src/store/redis/connect.js'
import { createRedisHotStore } from '../../src/store/redis/hot-store.js'
import { openTestRedis } from '../helpers/redis.js'
import { waitFor } from '../helpers/wait.js'

/**
 * A proxy starts its subscriber without waiting for it and follows its tenant at once. A
 * SSUBSCRIBE asked for while the connection's ready check was pending was written before it
 * (ioredis sends such commands in its 'connect' state), the check's INFO then failed on the
 * subscribed connection, which closed, and the channel was never subscribed again: about two
 * proxy starts in five heard no invalidation for their whole life (found in review).
 */
t.test('a channel followed while the subscriber connects is subscribed once it is ready', async (t) => {
  const tr = await openTestRedis()
  t.teardown(() => tr.close())
  for (let round = 0; round < 5; round++) {
    const connection = { url: tr.url, keyPrefix: tr.prefix }
    const redis = connectRedis(connection)
    const subscriber = connectRedis(connection, 'subscriber')
    await redis.connect()
    const hot = createRedisHotStore({ redis, subscriber, keyPrefix: tr.prefix, nowSeconds: () => 1_000 })
    t.teardown(async () => {
      await hot.close()
      redis.disconnect()
      subscriber.disconnect()
    })
    const tenantId = `ten_start${round}`
    const heard: number[] = []
    const connected = new Promise<void>((resolve) => subscriber.once('connect', () => resolve()))
    subscriber.connect().catch(() => {})
    await connected
    // Followed in the window between the TCP connection and the ready check's answer.
    const unfollow = hot.subscribe(tenantId, (v) => heard.push(v))
    const channel = `${tr.prefix}{${tenantId}}:inv`
    await waitFor(() => subscriber.status === 'ready', 10_000, `round ${round}: the subscriber is ready`)
    await waitFor(
      async () => {
        const [, n] = (await tr.redis.call('PUBSUB', 'SHARDNUMSUB', channel)) as [string, number]
        return n === 1
      },
      10_000,
      `round ${round}: the tenant's channel has its subscriber`,
    )
    await tr.redis.call('SPUBLISH', channel, '7')
    await waitFor(() => heard.includes(7), 10_000, `round ${round}: the bump is heard`)
    t.pass(`round ${round}: subscribed and heard`)
    unfollow()
  }
})
