import { EMPTY_HEAD } from '../../src/core/receipt.js'
import type { ReceiptReader } from '../../src/store/ports/receipt-reader.js'
import type { FakeContext } from './fake-database.js'

/** The audit log's read side (store/postgres/receipt-reader.ts) over the fake tables. */
export function createFakeReceiptReader(ctx: FakeContext): ReceiptReader {
  const ofTenant = (tenantId: string) => ctx.db.receipts.rows().filter((r) => r.tenantId === tenantId)
  return {
    async head(tenantId) {
      const h = ctx.db.auditHeads.get(tenantId)
      return h ? { seq: h.seq, hash: h.hash } : EMPTY_HEAD
    },
    async headSeqs(tenantIds) {
      const out = new Map<string, number>()
      for (const id of tenantIds) {
        const h = ctx.db.auditHeads.get(id)
        if (h) out.set(id, h.seq)
      }
      return out
    },
    async rows(tenantId, afterSeq, toSeq, limit) {
      return ofTenant(tenantId)
        .filter((r) => r.seq > afterSeq && r.seq <= toSeq)
        .sort((a, b) => a.seq - b.seq)
        .slice(0, limit)
        .map(({ keyId: _, ...row }) => row)
    },
    async decisionCounts(tenantId, since, cap) {
      const recent = ofTenant(tenantId)
        .filter((r) => r.createdAt >= since && (r.kind === 'CHECK' || r.kind === 'REVOKE'))
        .sort((a, b) => b.createdAt - a.createdAt || b.seq - a.seq)
      const byDecision: Record<string, number> = {}
      for (const r of recent.slice(0, cap)) {
        const decision = r.kind === 'REVOKE' ? 'REVOKE' : r.decision
        if (decision !== null) byDecision[decision] = (byDecision[decision] ?? 0) + 1
      }
      return { byDecision, truncated: recent.length > cap }
    },
    async gatedWrites(tenantId, since) {
      return ofTenant(tenantId).filter((r) => {
        if (r.createdAt < since || r.decision === null) return false
        if (r.kind === 'CHECK') return true
        if (r.kind !== 'EXECUTE') return false
        const body = JSON.parse(r.body) as { detail?: { phase?: unknown } }
        return body.detail?.phase !== 'completed'
      }).length
    },
  }
}
