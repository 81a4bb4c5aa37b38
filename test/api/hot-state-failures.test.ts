import { randomBytes } from 'node:crypto'
import t from 'tap'
import { deriveKeyring } from '../../src/security/keyring.js'
import { createMemoryHotStore } from '../../src/store/memory/hot-store.js'
import type { HotStore } from '../../src/store/ports/hot-store.js'
import { connectRedis } from '../../src/store/redis/connect.js'
import { createRedisHotStore } from '../../src/store/redis/hot-store.js'
import { openTestDatabase } from '../helpers/backends.js'
import { startControlPlane } from '../helpers/control-plane.js'
import { deaf } from '../helpers/fleet.js'
import { capturingLogger, LOG_LEVEL } from '../helpers/proxy.js'
import { openTestRedis } from '../helpers/redis.js'

/** A memory hot store whose publish can be made to fail, as when Redis is briefly away. */
function flakyPublish(): { hot: HotStore; failing: { on: boolean } } {
  const failing = { on: false }
  const inner = createMemoryHotStore()
  return {
    failing,
    hot: {
      ...inner,
      publish: (s) => (failing.on ? Promise.reject(new Error('ECONNRESET')) : inner.publish(s)),
    },
  }
}

t.test('a first key is never lost to a publish failure: its secrets are still shown', async (t) => {
  const { hot, failing } = flakyPublish()
  const { api } = await startControlPlane(t, 'fake', { hot })
  failing.on = true
  const r = await api.post('/v1/keys', { email: 'blip@example.com' })
  t.equal(r.status, 201)
  t.match(r.body, { apiKey: /^svc_/, sponsorToken: /^svc_sp_/, totp: { secret: String } })
  failing.on = false
  t.match(
    (await api.post('/v1/check', { verb: 'verify' }, { bearer: r.body.apiKey })).body,
    { decision: 'ALLOW' },
    'the missing snapshot is repaired on first use',
  )
})

t.test('a change that could not be published fails closed until it is', async (t) => {
  const { hot, failing } = flakyPublish()
  const { logger, lines } = capturingLogger()
  const { api } = await startControlPlane(t, 'fake', { hot, logger })
  const o = await api.newTenant()
  t.equal((await api.post('/v1/check', { verb: 'verify' }, { bearer: o.apiKey })).body.decision, 'ALLOW')
  failing.on = true
  const revoke = await api.post('/v1/revoke', { all: true }, { bearer: o.sponsorToken })
  t.same([revoke.status, revoke.body.code], [503, 'publish_pending'])
  const during = await api.post('/v1/check', { verb: 'verify' }, { bearer: o.apiKey })
  t.same(
    [during.status, during.body.code],
    [503, 'gate_unavailable'],
    'no decision lands on the pre-revoke state',
  )
  failing.on = false
  t.match((await api.post('/v1/check', { verb: 'verify' }, { bearer: o.apiKey })).body, {
    decision: 'DENY',
    reason: 'sponsor_revoked_tenant',
  })
  // An outage's refusals are warnings with their code: no error, no stack trace per request.
  const refusals = lines.filter((l) => l.msg === 'request refused: unavailable')
  t.same(
    refusals.map((l) => l.code),
    ['publish_pending', 'gate_unavailable'],
  )
  t.ok(
    refusals.every((l) => l.level === LOG_LEVEL.warn && l.err === undefined),
    'warnings, no stack',
  )
  t.same(
    lines.filter((l) => l.level >= LOG_LEVEL.error),
    [],
    'nothing at error level',
  )
})

t.test(
  'Redis: tokens verify linearizably on a replica that lost its invalidations; lost quota is re-seeded',
  async (t) => {
    const redis = await openTestRedis()
    const db = await openTestDatabase('postgres')
    t.teardown(async () => {
      await redis.close()
      await db.close()
    })
    const settings = { redis: { url: redis.url, keyPrefix: redis.prefix }, quota: { checksPerMonth: 5 } }
    // Replicas of one deployment share the master key (token signing).
    const keyring = deriveKeyring(randomBytes(32))
    const a = await startControlPlane(t, 'postgres', { db, settings, keyring })
    const cmd = connectRedis({ url: redis.url, keyPrefix: redis.prefix })
    const sub = connectRedis({ url: redis.url, keyPrefix: redis.prefix }, 'subscriber')
    await cmd.connect()
    await sub.connect()
    t.teardown(() => {
      cmd.disconnect()
      sub.disconnect()
    })
    const b = await startControlPlane(t, 'postgres', {
      db,
      settings,
      keyring,
      hot: deaf(
        createRedisHotStore({
          redis: cmd,
          subscriber: sub,
          keyPrefix: redis.prefix,
          nowSeconds: () => Math.floor(Date.now() / 1000),
        }),
      ),
    })
    const o = await a.api.newTenant()
    const token = (await a.api.post('/v1/check', { verb: 'verify' }, { bearer: o.apiKey })).body.token
    t.equal(
      (await b.api.post('/v1/tokens/verify', { token }, { bearer: o.apiKey })).body.valid,
      true,
      'replica B has cached the snapshot',
    )
    await a.api.post('/v1/revoke', { keyId: o.keyId }, { bearer: o.sponsorToken })
    t.same(
      (await b.api.post('/v1/tokens/verify', { token }, { bearer: o.apiKey })).body,
      { valid: false, reason: 'revoked' },
      'B judges under the current version despite its stale cache',
    )
    await a.api.post('/v1/reinstate', { keyId: o.keyId }, { bearer: o.sponsorToken })

    // Use up the quota (one check above, four more), then lose every hot key of the tenant.
    for (let i = 0; i < 4; i++)
      t.equal((await a.api.post('/v1/check', { verb: 'verify' }, { bearer: o.apiKey })).status, 200)
    t.equal((await a.api.post('/v1/check', { verb: 'verify' }, { bearer: o.apiKey })).status, 402)
    const keys = await redis.redis.keys(`${redis.prefix}{${o.tenantId}}*`)
    t.ok(keys.length > 0)
    await redis.redis.del(...keys)
    const after = await a.api.post('/v1/check', { verb: 'verify' }, { bearer: o.apiKey })
    t.same(
      [after.status, after.body.code],
      [402, 'quota_exhausted'],
      'the repaired tenant starts from its receipts, not from zero',
    )
  },
)

t.test('a key offered as proof while the gate cannot answer: 503, not "proof required"', async (t) => {
  const inner = createMemoryHotStore()
  const failing = { on: false }
  const hot: HotStore = {
    ...inner,
    commit: (req) => (failing.on ? Promise.reject(new Error('ECONNRESET')) : inner.commit(req)),
  }
  const { api } = await startControlPlane(t, 'fake', { hot })
  const o = await api.newTenant()
  failing.on = true
  const r = await api.post('/v1/keys', { email: o.email }, { bearer: o.apiKey })
  t.same([r.status, r.body.code], [503, 'gate_unavailable'])
  failing.on = false
  t.equal((await api.post('/v1/keys', { email: o.email }, { bearer: o.apiKey })).status, 201)
})
