import type { StoredReceiptRow } from '../../core/chain-verifier.js'
import { EMPTY_HEAD } from '../../core/receipt.js'
import type { ReceiptReader } from '../ports/receipt-reader.js'
import type { SqlHandle } from './sql-handle.js'

interface Row {
  seq: number
  tenant_id: string
  receipt_id: string
  kind: string
  decision: string | null
  created_at: number
  body: string
  hash: string
}

export function createReceiptReader(sql: SqlHandle): ReceiptReader {
  return {
    async head(tenantId) {
      const [h] = await sql<{ seq: number; hash: string }[]>`
        select seq, hash from audit_heads where tenant_id = ${tenantId}`
      return h ? { seq: Number(h.seq), hash: h.hash } : EMPTY_HEAD
    },
    async headSeqs(tenantIds) {
      const out = new Map<string, number>()
      if (tenantIds.length === 0) return out
      const rows = await sql<{ tenant_id: string; seq: number }[]>`
        select tenant_id, seq from audit_heads where tenant_id = any(${tenantIds as string[]})`
      for (const r of rows) out.set(r.tenant_id, Number(r.seq))
      return out
    },
    async rows(tenantId, afterSeq, toSeq, limit) {
      const rows = await sql<Row[]>`
        select seq, tenant_id, receipt_id, kind, decision, created_at, body, hash from receipts
        where tenant_id = ${tenantId} and seq > ${afterSeq} and seq <= ${toSeq}
        order by seq limit ${limit}`
      return rows.map(
        (r): StoredReceiptRow => ({
          seq: Number(r.seq),
          tenantId: r.tenant_id,
          receiptId: r.receipt_id,
          kind: r.kind,
          decision: r.decision,
          createdAt: Number(r.created_at),
          body: r.body,
          hash: r.hash,
        }),
      )
    },
    async decisionCounts(tenantId, since, cap) {
      // Only the most recent `cap` receipts are counted; one more is read to know whether the cap was hit.
      const rows = await sql<{ decision: string | null; n: number; over: boolean }[]>`
        select decision, count(*) filter (where rn <= ${cap}) as n, bool_or(rn > ${cap}) as over
        from (
          select decision, row_number() over (order by created_at desc, seq desc) as rn
          from (
            select case when kind = 'REVOKE' then 'REVOKE' else decision end as decision, created_at, seq
            from receipts
            where tenant_id = ${tenantId} and created_at >= ${since} and kind in ('CHECK', 'REVOKE')
            order by created_at desc, seq desc
            limit ${cap + 1}
          ) recent
        ) numbered
        group by decision`
      const byDecision: Record<string, number> = {}
      let truncated = false
      for (const r of rows) {
        if (r.decision !== null) byDecision[r.decision] = Number(r.n)
        truncated ||= r.over
      }
      return { byDecision, truncated }
    },
    async gatedWrites(tenantId, since) {
      // An execute's outcome receipt (`detail.phase: 'completed'`: decision ALLOW, null in older
      // logs) records the same write as its authorising one, so it is not counted. Only the
      // bodies of EXECUTE receipts are parsed.
      const [r] = await sql<{ n: number }[]>`
        select count(*) as n from receipts
        where tenant_id = ${tenantId} and created_at >= ${since} and decision is not null
          and kind in ('CHECK', 'EXECUTE')
          and case when kind = 'EXECUTE' then (body::jsonb #>> '{detail,phase}') is distinct from 'completed'
                   else true end`
      return Number(r?.n ?? 0)
    },
  }
}
