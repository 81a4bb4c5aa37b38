import type { Cluster } from 'ioredis'
import t from 'tap'
import { draft } from '../../src/core/receipt.js'
import { connectRedis } from '../../src/store/redis/connect.js'
import { createRedisHotStore } from '../../src/store/redis/hot-store.js'
import { openTestRedis } from '../helpers/redis.js'
import { startRedisCluster } from '../helpers/redis-cluster.js'
import { emptySnapshot } from '../helpers/snapshots.js'
import { startTcpRelay } from '../helpers/tcp-relay.js'

/**
 * A commit that Redis ran but whose reply was lost to a cut connection (a Redis restart, a
 * CLIENT KILL, a load balancer's reset) must not run again: the commit script is not
 * idempotent. ioredis resends unanswered commands after reconnecting unless told not to; a
 * second run found its grant used, queued a DENY beside the ALLOW and counted quota twice.
 */
t.test('a commit whose reply is lost fails closed, and is not run a second time', async (t) => {
  const tr = await openTestRedis()
  t.teardown(() => tr.close())
  const relay = await startTcpRelay(t, new URL(tr.url), 6379)
  const redis = connectRedis({ url: relay.url, keyPrefix: tr.prefix })
  const subscriber = connectRedis({ url: tr.url, keyPrefix: tr.prefix }, 'subscriber')
  await redis.connect()
  await subscriber.connect()
  const hot = createRedisHotStore({
    redis,
    subscriber,
    keyPrefix: tr.prefix,
    nowSeconds: () => Math.floor(Date.now() / 1000),
  })
  t.teardown(async () => {
    await hot.close()
    redis.disconnect()
    subscriber.disconnect()
  })

  const tenantId = 'ten_lostreply'
  await hot.publish(emptySnapshot(tenantId, 1, 1))
  const allow = draft({ receiptId: 'rcp_allow', tenantId, kind: 'CHECK', decision: 'ALLOW', createdAt: 1 })
  const deny = draft({ receiptId: 'rcp_deny', tenantId, kind: 'CHECK', decision: 'DENY', createdAt: 1 })
  // The next reply carrying a commit's `ok` is lost, and the connection cut.
  relay.cutAtReply('\r\nok\r\n')
  const outcome = await hot
    .commit({
      tenantId,
      version: 1,
      quota: { keyId: 'key_a', period: '2026-11', limit: 100 },
      grantCandidates: [{ grantId: 'grt_1', expiresAt: Math.floor(Date.now() / 1000) + 3600 }],
      durable: {
        otherwise: { receipts: [deny], actions: [] },
        ifGranted: [{ receipts: [allow], actions: [] }],
      },
    })
    .then(
      (r) => `answered ${r.status}`,
      () => 'failed',
    )
  t.equal(
    outcome,
    'failed',
    'the caller is told the commit failed: it fails closed (503), nothing goes upstream',
  )
  t.ok(relay.cut, 'the reply was dropped')
  const entries = await tr.redis.xrange(`${tr.prefix}{${tenantId}}:rq`, '-', '+')
  t.equal(entries.length, 1, 'the commit ran once: one payload queued')
  t.equal(await tr.redis.get(`${tr.prefix}{${tenantId}}:q:key_a:2026-11`), '1', 'and counted once')

  // The connection comes back, and commits go through again.
  const again = await hot.commit({
    tenantId,
    version: 1,
    quota: null,
    grantCandidates: [],
    durable: { otherwise: { receipts: [deny], actions: [] } },
  })
  t.equal(again.status, 'committed')
})

t.test('on a Redis Cluster too: a command whose connection closed under it is not run again', async (t) => {
  const cluster = await startRedisCluster(t)
  const redis = connectRedis({ url: cluster.url, keyPrefix: 'wgt:lost:', cluster: true }) as Cluster
  await redis.connect()
  t.teardown(() => redis.disconnect())
  // A script that counts its runs, then takes long enough for its connection to be cut.
  const slowCount = `redis.call('INCR', KEYS[1]); local s = redis.call('TIME')
local start = s[1] * 1000000 + s[2]
while true do local n = redis.call('TIME'); if (n[1] * 1000000 + n[2]) - start > 300000 then break end end
return 'ok'`
  const key = '{ten_lostreply}:runs'
  const outcome = redis.eval(slowCount, 1, key).then(
    () => 'answered',
    () => 'failed',
  )
  await new Promise((r) => setTimeout(r, 80))
  for (const node of redis.nodes('master')) node.stream?.destroy()
  t.equal(await outcome, 'failed', 'the caller is told it failed (fail closed)')
  await new Promise((r) => setTimeout(r, 500))
  t.equal(await cluster.client.get(key), '1', 'it ran once')
})
