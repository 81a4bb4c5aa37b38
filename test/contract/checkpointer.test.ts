import t from 'tap'
import { createCheckpointer } from '../../src/audit/checkpointer.js'
import { checkpointSignatureValid } from '../../src/core/checkpoint.js'
import { ManualClock } from '../../src/core/clock.js'
import { newId } from '../../src/core/ids.js'
import { draft } from '../../src/core/receipt.js'
import { createLogger } from '../../src/observability/logger.js'
import { createCheckpointStore } from '../../src/store/postgres/checkpoint-store.js'
import { createReceiptReader } from '../../src/store/postgres/receipt-reader.js'
import { createSystemOfRecord } from '../../src/store/postgres/system-of-record.js'
import { ed25519 } from '../helpers/audit-logs.js'
import { API_BACKENDS, openTestDatabase } from '../helpers/backends.js'
import { waitFor } from '../helpers/wait.js'

for (const kind of API_BACKENDS) {
  t.test(`checkpointer: ${kind}`, async (t) => {
    const tdb = await openTestDatabase(kind)
    t.teardown(() => tdb.close())
    const sor = createSystemOfRecord(tdb.db)
    const checkpoints = createCheckpointStore(tdb.db.sql)
    const reader = createReceiptReader(tdb.db.sql)
    const key = ed25519()
    const clock = new ManualClock(1_800_000_000_000)
    const make = (intervalMs: number) =>
      createCheckpointer({
        checkpoints,
        reader,
        signingKey: key.privateKey,
        clock,
        intervalMs,
        logger: createLogger('silent'),
      })
    const append = (tenantId: string, n: number) =>
      sor.transaction((s) =>
        s.receipts.append(
          Array.from({ length: n }, () =>
            draft({ receiptId: newId('receipt'), tenantId, kind: 'GRANT', createdAt: 1 }),
          ),
        ),
      )

    t.test('signs every moved head on its own cadence, without being asked', async (t) => {
      const tenant = newId('tenant')
      const silent = newId('tenant')
      await sor.stores.tenants.create({ id: silent, name: 'S', createdAt: 1, sponsorHash: `h-${silent}` })
      const written = await append(tenant, 3)
      const c = make(20)
      c.start()
      t.teardown(() => c.stop())
      await waitFor(async () => (await checkpoints.latest(tenant)) !== null, 10_000, 'a checkpoint')
      const cp = await checkpoints.latest(tenant)
      t.match(cp, { tenantId: tenant, seq: 3, hash: written[2]?.hash, at: 1_800_000_000 })
      t.equal(checkpointSignatureValid(key.publicKey, cp!), true)
      t.equal(await checkpoints.latest(silent), null, 'a tenant that never wrote is skipped')
      await append(tenant, 2)
      await waitFor(async () => (await checkpoints.latest(tenant))?.seq === 5, 10_000, 'the moved head')
    })

    t.test('replicas checkpointing the same head agree; stop() anchors the final head', async (t) => {
      const tenant = newId('tenant')
      await append(tenant, 2)
      const one = make(3_600_000)
      const two = make(3_600_000)
      const [x, y] = await Promise.all([one.checkpointTenant(tenant), two.checkpointTenant(tenant)])
      t.same(x, y, 'the same stored checkpoint')
      clock.advance(5000)
      await two.runOnce()
      t.same(await checkpoints.latest(tenant), x, 'an idle head is not re-signed')
      await append(tenant, 1)
      one.start()
      await one.stop()
      t.equal((await checkpoints.latest(tenant))?.seq, 3, 'the last head is anchored at shutdown')
      t.equal(await one.checkpointTenant(newId('tenant')), null, 'an empty log has no checkpoint')
    })

    t.test("after the key's rotation, an idle head is signed again for the caller, not stored", async (t) => {
      // Found in review: an export of an idle tenant carried the old key's checkpoint, and failed
      // verification with the published (new) key.
      const tenant = newId('tenant')
      await append(tenant, 2)
      const old = await make(3_600_000).checkpointTenant(tenant)
      const rotated = ed25519()
      const current = createCheckpointer({
        checkpoints,
        reader,
        signingKey: rotated.privateKey,
        clock,
        intervalMs: 3_600_000,
        logger: createLogger('silent'),
      })
      const again = await current.checkpointTenant(tenant)
      t.match(again, { tenantId: tenant, seq: old?.seq, hash: old?.hash })
      t.equal(checkpointSignatureValid(rotated.publicKey, again!), true, 'verifies with the current key')
      t.same(await checkpoints.at(tenant, 2), old, 'the stored checkpoint stays, as evidence')
      // A head rewritten since the old key signed it is not signed again.
      await tdb.db.sql`update audit_heads set hash = ${'f'.repeat(64)} where tenant_id = ${tenant}`
      t.same(await current.checkpointTenant(tenant), old, 'a head the stored checkpoint disagrees with')
    })
  })
}
