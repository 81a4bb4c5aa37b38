import { chainReceipts, type Receipt, type ReceiptDraft } from '../../src/core/receipt.js'
import { GENESIS_HASH } from '../../src/core/receipt-chain.js'
import type { ReceiptStore } from '../../src/store/ports/audit.js'
import {
  assertContiguous,
  newDraftsByTenant,
  receiptFromRow,
} from '../../src/store/postgres/receipt-store.js'
import { ConstraintViolation, type FakeContext, key, type ReceiptRow } from './fake-database.js'

function storedById(ctx: FakeContext, receiptIds: ReadonlySet<string>): Map<string, Receipt> {
  const out = new Map<string, Receipt>()
  for (const r of ctx.db.receipts.rows())
    if (receiptIds.has(r.receiptId)) out.set(r.receiptId, receiptFromRow(r))
  return out
}

function insert(ctx: FakeContext, receipts: readonly Receipt[], bodies: readonly string[]): void {
  receipts.forEach((r, i) => {
    const k = key(r.tenantId, r.seq)
    if (ctx.db.receipts.has(k)) throw new ConstraintViolation('receipts_pkey (tenant_id, seq)')
    const row: ReceiptRow = {
      tenantId: r.tenantId,
      seq: r.seq,
      receiptId: r.receiptId,
      kind: r.kind,
      decision: r.decision,
      createdAt: r.createdAt,
      keyId: r.keyId,
      body: bodies[i] as string,
      hash: r.hash,
    }
    ctx.db.receipts.set(ctx.tx, k, row)
  })
}

/**
 * The hash-chained log, as store/postgres/receipt-store.ts keeps it: one head row per tenant.
 * No NOTIFY: the fake is one process's storage, like PGlite, so streams wake in process.
 */
export function createFakeReceiptStore(ctx: FakeContext): ReceiptStore {
  return {
    async append(drafts: readonly ReceiptDraft[]) {
      if (drafts.length === 0) return []
      // The heads' row locks, in tenant-id order like the SQL's, held to the end of the transaction.
      for (const tenantId of [...new Set(drafts.map((d) => d.tenantId))].sort())
        await ctx.db.locks.acquire(ctx.tx, `audit_heads:${tenantId}`)
      const all = storedById(ctx, new Set(drafts.map((d) => d.receiptId)))
      const fresh = newDraftsByTenant(drafts, all)
      for (const [tenantId, list] of fresh) {
        const head = ctx.db.auditHeads.get(tenantId) ?? { tenantId, seq: 0, hash: GENESIS_HASH }
        const chained = chainReceipts({ seq: head.seq, hash: head.hash }, list)
        insert(ctx, chained.receipts, chained.bodies)
        for (const r of chained.receipts) all.set(r.receiptId, r)
        ctx.db.auditHeads.set(ctx.tx, tenantId, { tenantId, seq: chained.head.seq, hash: chained.head.hash })
      }
      return drafts.map((d) => all.get(d.receiptId) as Receipt)
    },
    async appendChained(batches) {
      if (batches.length === 0) return { stale: [] }
      assertContiguous(batches)
      for (const tenantId of batches.map((b) => b.tenantId).sort())
        await ctx.db.locks.acquire(ctx.tx, `audit_heads:${tenantId}`)
      const stale: string[] = []
      const ready = batches.filter((b) => {
        const head = ctx.db.auditHeads.get(b.tenantId)
        const at = head ?? { seq: 0, hash: GENESIS_HASH }
        // The SQL joins on the head row: a tenant with none yet is stale, whatever `from` says.
        const ok = head !== undefined && at.seq === b.from.seq && at.hash === b.from.hash
        if (!ok) stale.push(b.tenantId)
        return ok
      })
      // One statement in the real store: any clash writes nothing at all.
      const ids = new Set(ready.flatMap((b) => b.receipts.map((r) => r.receiptId)))
      if (storedById(ctx, ids).size > 0) throw new ConstraintViolation('receipts_receipt_id_key')
      for (const b of ready)
        for (const r of b.receipts)
          if (ctx.db.receipts.has(key(r.tenantId, r.seq))) throw new ConstraintViolation('receipts_pkey')
      for (const b of ready) {
        insert(ctx, b.receipts, b.bodies)
        ctx.db.auditHeads.set(ctx.tx, b.tenantId, { tenantId: b.tenantId, seq: b.to.seq, hash: b.to.hash })
      }
      return { stale }
    },
    async get(tenantId, receiptId) {
      const row = ctx.db.receipts.rows().find((r) => r.tenantId === tenantId && r.receiptId === receiptId)
      return row ? receiptFromRow(row) : null
    },
    async list(tenantId, afterSeq, limit) {
      return ctx.db.receipts
        .rows()
        .filter((r) => r.tenantId === tenantId && r.seq > afterSeq)
        .sort((a, b) => a.seq - b.seq)
        .slice(0, limit)
        .map(receiptFromRow)
    },
    async checkCountsSince(sinceSeconds, tenantId) {
      const counts = new Map<string, { tenantId: string; keyId: string; count: number }>()
      for (const r of ctx.db.receipts.rows()) {
        if (r.kind !== 'CHECK' || r.createdAt < sinceSeconds || r.keyId === null) continue
        if (tenantId !== undefined && r.tenantId !== tenantId) continue
        const k = key(r.tenantId, r.keyId)
        const c = counts.get(k) ?? { tenantId: r.tenantId, keyId: r.keyId, count: 0 }
        c.count++
        counts.set(k, c)
      }
      return [...counts.values()]
    },
  }
}
