import { chainReceipts, type Receipt, type ReceiptDraft } from '../../core/receipt.js'
import { GENESIS_HASH } from '../../core/receipt-chain.js'
import type { ReceiptStore } from '../ports/audit.js'
import type { SqlHandle } from './sql-handle.js'

/**
 * Postgres channel that wakes receipt streams. The NOTIFY is issued inside the appending
 * transaction, so Postgres delivers it only after commit, and never for a rollback. It is
 * only a wake-up: streams always read seq > cursor from the table.
 */
export const RECEIPTS_CHANNEL = 'writegate_receipts'

interface ReceiptRow {
  body: string
  hash: string
}

/** The stored body is the exact JCS text that was hashed; the receipt is that plus its hash. */
export function receiptFromRow(r: ReceiptRow): Receipt {
  return { ...(JSON.parse(r.body) as Omit<Receipt, 'hash'>), hash: r.hash }
}

export function createReceiptStore(sql: SqlHandle): ReceiptStore {
  async function appendForTenant(tenantId: string, drafts: ReceiptDraft[]): Promise<Map<string, Receipt>> {
    await sql`insert into audit_heads (tenant_id, seq, hash) values (${tenantId}, 0, ${GENESIS_HASH})
              on conflict (tenant_id) do nothing`
    const [head] = await sql<{ seq: number; hash: string }[]>`
      select seq, hash from audit_heads where tenant_id = ${tenantId} for update`
    if (!head) throw new Error(`audit head missing for ${tenantId}`)
    const out = new Map<string, Receipt>()
    // Under the head lock, so this check cannot race another append of the same receipt.
    const existing = await sql<ReceiptRow[]>`select body, hash from receipts
                                             where receipt_id = any(${drafts.map((d) => d.receiptId)})`
    for (const row of existing) {
      const r = receiptFromRow(row)
      out.set(r.receiptId, r)
    }
    const seen = new Set<string>()
    const fresh = drafts.filter((d) => {
      if (out.has(d.receiptId) || seen.has(d.receiptId)) return false
      seen.add(d.receiptId)
      return true
    })
    if (fresh.length === 0) return out
    const chained = chainReceipts({ seq: Number(head.seq), hash: head.hash }, fresh)
    const rows = chained.receipts.map((r, i) => ({
      tenant_id: r.tenantId,
      seq: r.seq,
      receipt_id: r.receiptId,
      kind: r.kind,
      decision: r.decision,
      created_at: r.createdAt,
      body: chained.bodies[i] as string,
      hash: r.hash,
    }))
    await sql`insert into receipts ${sql(rows, 'tenant_id', 'seq', 'receipt_id', 'kind', 'decision', 'created_at', 'body', 'hash')}`
    await sql`update audit_heads set seq = ${chained.head.seq}, hash = ${chained.head.hash}
              where tenant_id = ${tenantId}`
    await sql`select pg_notify(${RECEIPTS_CHANNEL}, ${tenantId})`
    for (const r of chained.receipts) out.set(r.receiptId, r)
    return out
  }

  return {
    async append(drafts) {
      if (drafts.length === 0) return []
      const byTenant = new Map<string, ReceiptDraft[]>()
      for (const d of drafts) {
        const list = byTenant.get(d.tenantId) ?? []
        list.push(d)
        byTenant.set(d.tenantId, list)
      }
      const all = new Map<string, Receipt>()
      // Fixed lock order across tenants: concurrent batches never deadlock.
      for (const tenantId of [...byTenant.keys()].sort()) {
        for (const [id, r] of await appendForTenant(tenantId, byTenant.get(tenantId) ?? [])) all.set(id, r)
      }
      return drafts.map((d) => all.get(d.receiptId) as Receipt)
    },
    async get(tenantId, receiptId) {
      const [r] = await sql<ReceiptRow[]>`select body, hash from receipts
                                          where tenant_id = ${tenantId} and receipt_id = ${receiptId}`
      return r ? receiptFromRow(r) : null
    },
    async list(tenantId, afterSeq, limit) {
      const rows = await sql<ReceiptRow[]>`select body, hash from receipts
                                           where tenant_id = ${tenantId} and seq > ${afterSeq}
                                           order by seq limit ${limit}`
      return rows.map(receiptFromRow)
    },
  }
}
