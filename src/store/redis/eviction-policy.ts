import { Cluster } from 'ioredis'
import type { RedisClient } from './connect.js'

/**
 * The eviction policies, other than `noeviction`, of the server (every master of a cluster).
 * Grant markers and quota counters carry a TTL, so a `volatile-*` policy may evict them under
 * memory pressure, and a single-use grant is then used twice and a quota passed; an `allkeys-*`
 * policy may evict receipt streams, and receipts are lost. Managed Redis services often default
 * to `volatile-lru`. Read from INFO (allowed where CONFIG is not).
 */
export async function evictionPolicies(redis: RedisClient): Promise<string[]> {
  const nodes = redis instanceof Cluster ? redis.nodes('master') : [redis]
  const evicting: string[] = []
  for (const node of nodes) {
    const info = await node.info('memory')
    const policy = /^maxmemory_policy:(\S+)/m.exec(info)?.[1]
    if (policy !== undefined && policy !== 'noeviction') evicting.push(policy)
  }
  return evicting
}
