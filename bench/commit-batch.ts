/**
 * What a hot-store commit costs the process that sends it, by how many commits share one Redis
 * script call: the client's CPU per call and per commit, fitted over batches of 1, 3, 10 and 30
 * (alternating rounds), beside the same run's baseline, a bare `PING` round trip on the same
 * connection. It explains why the gate's cost per write falls as a proxy's concurrency grows
 * (docs/performance.md, "a ninth, faster machine").
 * Run: taskset -c 0 npm run bench:commit   (Redis on another CPU; WRITEGATE_BENCH_REDIS_URL, default redis://127.0.0.1:6379)
 */
import { draft } from '../src/core/receipt.js'
import { connectRedis } from '../src/store/redis/connect.js'
import { createRedisHotStore } from '../src/store/redis/hot-store.js'
import { emptySnapshot } from '../test/helpers/snapshots.js'

const URL_ = process.env.WRITEGATE_BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379'
const COMMITS = 20_000
const BATCHES = [1, 3, 10, 30]
const prefix = `wgbench${process.pid}:`
const redis = connectRedis({ url: URL_, keyPrefix: prefix })
const subscriber = connectRedis({ url: URL_, keyPrefix: prefix }, 'subscriber')
await redis.connect()
await subscriber.connect()
const hot = createRedisHotStore({
  redis,
  subscriber,
  keyPrefix: prefix,
  nowSeconds: () => Math.floor(Date.now() / 1000),
})
const tenantId = 'tenant_bench'
const snapshot = emptySnapshot(tenantId, 1, 0)
await hot.publish(snapshot)

let n = 0
/** One commit as gate-proxy makes it for an ALLOWed write: its quota and its CHECK receipt. */
const commit = () =>
  hot.commit({
    tenantId,
    version: 1,
    quota: { keyId: 'key_bench', period: '2026-11', limit: 1e12 },
    grantCandidates: [],
    durable: {
      otherwise: {
        receipts: [
          draft({
            receiptId: `rcp_bench${n++}`,
            tenantId,
            kind: 'CHECK',
            createdAt: 1,
            keyId: 'key_bench',
            detail: {
              verb: 'refund',
              target: 'ch_123',
              decision: 'ALLOW',
              systemId: 'sys_billing',
              method: 'POST',
              path: '/v1/refunds',
            },
          }),
        ],
        actions: [],
      },
    },
  })

/** Client CPU (user + system) in µs per call of `call`, run `calls` times one after another. */
async function cpuPerCall(calls: number, call: () => Promise<unknown>): Promise<number> {
  for (let i = 0; i < Math.min(200, calls); i++) await call()
  const before = process.cpuUsage()
  for (let i = 0; i < calls; i++) await call()
  const used = process.cpuUsage(before)
  return (used.user + used.system) / calls
}

const rounds: Record<number, number[]> = Object.fromEntries(BATCHES.map((b) => [b, []]))
const pings: number[] = []
for (let round = 0; round < 2; round++) {
  pings.push(await cpuPerCall(COMMITS, () => redis.ping()))
  for (const batch of round === 0 ? BATCHES : [...BATCHES].reverse())
    rounds[batch]?.push(
      await cpuPerCall(Math.round(COMMITS / batch), () => Promise.all(Array.from({ length: batch }, commit))),
    )
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number
const perCall = BATCHES.map((b) => median(rounds[b] as number[]))
// Least squares of CPU per call = fixed + batch × per commit.
const mx = BATCHES.reduce((a, b) => a + b, 0) / BATCHES.length
const my = perCall.reduce((a, b) => a + b, 0) / perCall.length
const slope =
  BATCHES.reduce((a, b, i) => a + (b - mx) * ((perCall[i] as number) - my), 0) /
  BATCHES.reduce((a, b) => a + (b - mx) ** 2, 0)
const fixed = my - slope * mx
const ping = median(pings)

console.log(`hot-store commits, client CPU (user + system), node ${process.version}, ${URL_}`)
console.log(`baseline: a PING round trip on the same connection ${ping.toFixed(1)} µs of CPU per call`)
BATCHES.forEach((b, i) => {
  const c = perCall[i] as number
  console.log(
    `batch ${String(b).padStart(2)}: ${c.toFixed(1)} µs per call (${(c / ping).toFixed(2)}× a PING), ${(c / b).toFixed(1)} µs per commit`,
  )
})
console.log(
  `fit: ≈ ${fixed.toFixed(0)} µs per call (${(fixed / ping).toFixed(2)}× a PING) + ≈ ${slope.toFixed(0)} µs per commit`,
)

for (const key of await redis.keys(`${prefix}*`)) await redis.del(key.slice(prefix.length))
await hot.close()
redis.disconnect()
subscriber.disconnect()
