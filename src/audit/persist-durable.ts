import type { Receipt, ReceiptDraft } from '../core/receipt.js'
import type { PendingAction } from '../store/ports/decision-state.js'
import type { DurablePayload } from '../store/ports/hot-store.js'
import type { SystemOfRecord } from '../store/ports/index.js'
import type { AuditLog } from './audit-log.js'

/**
 * Stores what a proxy committed, atomically: its receipts join the chain, a grant a CHECK
 * consumed is marked used, and a staged action becomes pending. Idempotent, so a
 * redelivered payload (the drain is at-least-once) changes nothing.
 */
export async function persistDurable(
  sor: SystemOfRecord,
  audit: AuditLog,
  payload: DurablePayload,
): Promise<Receipt[]> {
  const consumed = payload.receipts.filter(consumesGrant)
  // Receipts alone (a proxy's ALLOW and DENY writes, the usual case) need no other row in
  // their transaction: the group commit stores them, chained in memory, in one statement,
  // shared with the API's appends to the same chains instead of racing them for the head.
  if (consumed.length === 0 && payload.actions.length === 0) return audit.append(payload.receipts)
  return sor.transaction(async (stores) => {
    // A payload delivered again must not bring back an action approved or dismissed since (found
    // in review: it was pending again, and approved a second time, sent twice). An action whose
    // staging receipt the log already holds was stored with it the first time; only one staged
    // by this append is inserted.
    const fresh: PendingAction[] = []
    for (const a of payload.actions)
      if (!(await stores.receipts.get(a.tenantId, a.stagedReceiptId))) fresh.push(a)
    const receipts = await audit.appendWith(stores, payload.receipts)
    for (const r of consumed)
      await stores.grants.markConsumed(r.tenantId, r.detail.grantId as string, r.createdAt, r.receiptId)
    for (const a of fresh) await stores.actions.insertIfAbsent(a)
    return receipts
  })
}

function consumesGrant(r: ReceiptDraft): boolean {
  return r.kind === 'CHECK' && r.decision === 'ALLOW' && typeof r.detail.grantId === 'string'
}
