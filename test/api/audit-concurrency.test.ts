import type { Registry } from 'prom-client'
import t from 'tap'
import { nowSeconds } from '../../src/core/clock.js'
import { newId } from '../../src/core/ids.js'
import { draft } from '../../src/core/receipt.js'
import { createSystemOfRecord } from '../../src/store/postgres/system-of-record.js'
import { startControlPlane } from '../helpers/control-plane.js'
import { openStream, type StreamedReceipt, waitFor } from '../helpers/sse.js'

const WRITERS = 50
const PER_WRITER = 200
const ROLLBACK_EVERY = 9

t.test('50 writers x 200 appends on real Postgres, some rolled back, one reconnecting stream', async (t) => {
  const tcp = await startControlPlane(t, 'postgres')
  const { cp, api } = tcp
  const base = await cp.app.listen({ port: 0, host: '127.0.0.1' })
  const a = await api.newTenant()
  const log = cp.auditTrail.log
  const sor = createSystemOfRecord(cp.database!)
  const at = nowSeconds(tcp.clock)
  const d = (writer: number, i: number) =>
    draft({
      receiptId: newId('receipt'),
      tenantId: a.tenantId,
      kind: 'CHECK',
      decision: 'ALLOW',
      createdAt: at,
      detail: { writer, i },
    })

  let committed = 0
  let rolledBack = 0
  let writersDone = false
  const rolledBackIds = new Set<string>()
  async function writer(w: number): Promise<void> {
    for (let i = 0; i < PER_WRITER; i++) {
      const draftOf = d(w, i)
      if ((w * PER_WRITER + i) % ROLLBACK_EVERY === 0) {
        // The receipt is appended in the caller's transaction, which then fails: none of it may remain.
        await sor
          .transaction(async (stores) => {
            await log.appendWith(stores, [draftOf])
            throw new Error('rolled back on purpose')
          })
          .catch(() => {})
        rolledBack += 1
        rolledBackIds.add(draftOf.receiptId)
      } else {
        await log.append([draftOf])
        committed += 1
      }
    }
  }

  // The consumer reconnects after a random number of receipts, resuming from the last id it saw.
  const seen: StreamedReceipt[] = []
  let reconnects = 0
  let finalHead = Number.POSITIVE_INFINITY
  async function consumer(): Promise<void> {
    while (!(writersDone && (seen.at(-1)?.seq ?? 0) >= finalHead)) {
      const last = seen.at(-1)?.seq
      const c = openStream(base, a.apiKey, last === undefined ? {} : { lastEventId: last })
      const quota = 1 + Math.floor(Math.random() * 1500)
      try {
        await waitFor(
          () =>
            c.received.length >= quota || (writersDone && (c.received.at(-1)?.seq ?? last ?? 0) >= finalHead),
          60_000,
          'stream progress',
        )
      } finally {
        c.close()
      }
      seen.push(...c.received)
      reconnects += 1
    }
  }

  const consuming = consumer()
  await Promise.all(Array.from({ length: WRITERS }, (_, w) => writer(w)))
  const v = (await api.get('/v1/receipts/verify', { bearer: a.apiKey })).body
  finalHead = v.headSeq
  writersDone = true
  await consuming

  t.equal(committed + rolledBack, WRITERS * PER_WRITER)
  t.ok(rolledBack > 1000, `${rolledBack} appends were rolled back`)
  t.equal(v.valid, true, 'the chain verifies')
  t.equal(v.checked, v.headSeq)
  const [counts] = await cp.database!.sql<{ n: number; min: number; max: number }[]>`
    select count(*)::int as n, min(seq)::int as min, max(seq)::int as max
    from receipts where tenant_id = ${a.tenantId}`
  t.same(counts, { n: v.headSeq, min: 1, max: v.headSeq }, 'seq is exactly 1..N')
  t.equal(
    v.headSeq,
    committed + 2,
    'every committed append and the two issuance receipts; no rolled-back one',
  )
  const paths = await appendsByPath(cp.metrics.registry)
  t.equal(
    (paths.chained ?? 0) + (paths.transaction ?? 0),
    committed,
    `writegate_audit_appends_total counts each committed append once (${JSON.stringify(paths)})`,
  )
  t.ok(reconnects > 3, `the consumer reconnected ${reconnects - 1} times`)
  t.same(
    seen.map((r) => r.seq),
    Array.from({ length: v.headSeq }, (_, i) => i + 1),
    'the stream delivered exactly N receipts, in order, with no duplicates',
  )
  t.notOk(
    seen.some((r) => rolledBackIds.has(r.receiptId)),
    'no rolled-back receipt was ever streamed',
  )
})

async function appendsByPath(registry: Registry): Promise<Record<string, number>> {
  const metric = await registry.getSingleMetric('writegate_audit_appends_total')?.get()
  return Object.fromEntries((metric?.values ?? []).map((v) => [String(v.labels.path), v.value]))
}
