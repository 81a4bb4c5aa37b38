import { connect, createServer, type Socket } from 'node:net'
import t from 'tap'
import { openDatabase } from '../../src/store/postgres/connect.js'
import { openTestDatabase } from '../helpers/backends.js'
import { startControlPlane } from '../helpers/control-plane.js'

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
    const target = new URL(real.url as string)
    // A relay in front of Postgres that, once armed, drops the server's next message carrying a
    // COMMIT's completion and cuts the connection.
    let armed = false
    const sockets = new Set<Socket>()
    const relay = createServer((client) => {
      const upstream = connect(Number(target.port || 5432), '127.0.0.1')
      sockets.add(client).add(upstream)
      client.on('error', () => upstream.destroy())
      upstream.on('error', () => client.destroy())
      client.on('close', () => upstream.destroy())
      upstream.on('close', () => client.destroy())
      client.on('data', (d) => upstream.write(d))
      upstream.on('data', (d) => {
        if (armed && d.includes('COMMIT\0')) {
          armed = false
          client.destroy()
          upstream.destroy()
          return
        }
        client.write(d)
      })
    })
    await new Promise<void>((r) => relay.listen(0, '127.0.0.1', r))
    t.teardown(() => {
      for (const s of sockets) s.destroy()
      relay.close()
    })
    const url = new URL(target)
    url.hostname = '127.0.0.1'
    url.port = String((relay.address() as { port: number }).port)
    const db = await openDatabase({ kind: 'postgres', url: url.toString(), maxConnections: 4 })
    const { api, cp } = await startControlPlane(t, 'postgres', {
      db: { db, url: url.toString(), close: () => db.close() },
    })
    const tenant = await api.newTenant()
    await api.put('/v1/policy', { refund: 'require_grant' }, { bearer: tenant.apiKey })
    const grant = await api.post(
      '/v1/grants',
      { verb: 'refund', target: 'ch_1' },
      { bearer: tenant.sponsorToken },
    )
    t.equal(grant.status, 201)

    armed = true
    const first = await api.post('/v1/check', { verb: 'refund', target: 'ch_1' }, { bearer: tenant.apiKey })
    t.notOk(armed, "the COMMIT's reply was lost")
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
