import t from 'tap'
import { openDatabase } from '../../src/store/postgres/connect.js'
import { openTestDatabase } from '../helpers/backends.js'
import { startControlPlane } from '../helpers/control-plane.js'
import { startTcpRelay } from '../helpers/tcp-relay.js'

/**
 * A check that spends a single-use grant commits its receipt and the grant's use in one
 * transaction. When the COMMIT's reply is lost with its connection, the transaction may have
 * committed: giving the grant back then let a retry spend it a second time.
 */
t.test(
  'a check whose COMMIT reply is lost: committed, it stands; the grant is not spent twice',
  async (t) => {
    const real = await openTestDatabase('postgres')
    t.teardown(() => real.close())
    const relay = await startTcpRelay(t, new URL(real.url as string), 5432)
    const db = await openDatabase({ kind: 'postgres', url: relay.url, maxConnections: 4 })
    const { api, cp } = await startControlPlane(t, 'postgres', {
      db: { db, url: relay.url, close: () => db.close() },
    })
    const tenant = await api.newTenant()
    await api.put('/v1/policy', { refund: 'require_grant' }, { bearer: tenant.apiKey })
    const grant = await api.post(
      '/v1/grants',
      { verb: 'refund', target: 'ch_1' },
      { bearer: tenant.sponsorToken },
    )
    t.equal(grant.status, 201)

    // The server's message completing the COMMIT is lost, and the connection cut.
    relay.cutAtReply('COMMIT\0')
    const first = await api.post('/v1/check', { verb: 'refund', target: 'ch_1' }, { bearer: tenant.apiKey })
    t.ok(relay.cut, "the COMMIT's reply was lost")
    t.same(
      [first.status, first.body.decision, first.body.reason],
      [200, 'ALLOW', 'grant_consumed'],
      'the transaction had committed: the check is answered as it was decided',
    )
    const retry = await api.post('/v1/check', { verb: 'refund', target: 'ch_1' }, { bearer: tenant.apiKey })
    t.equal(retry.body.decision, 'DENY', 'the grant is used: a second write is not paid for')

    const checks = await cp.database!.sql<{ decision: string; grant_id: string | null }[]>`
    select decision, body::json->'detail'->>'grantId' as grant_id from receipts
    where tenant_id = ${tenant.tenantId} and kind = 'CHECK' order by seq`
    t.same(
      checks.filter((c) => c.grant_id === grant.body.grantId).map((c) => c.decision),
      ['ALLOW'],
      'one ALLOW spent the grant',
    )
  },
)
