import type { Receipt } from '../core/receipt.js'
import type { DurablePayload } from '../store/ports/hot-store.js'
import type { SystemOfRecord } from '../store/ports/index.js'
import type { AuditLog } from './audit-log.js'

/**
 * Stores what a proxy committed, in one transaction: its receipts join the chain, a grant a
 * CHECK consumed is marked used, and a staged action becomes pending. Idempotent, so a
 * redelivered payload (the drain is at-least-once) changes nothing.
 */
export async function persistDurable(
  sor: SystemOfRecord,
  audit: AuditLog,
  payload: DurablePayload,
): Promise<Receipt[]> {
  return sor.transaction(async (stores) => {
    const receipts = await audit.appendWith(stores, payload.receipts)
    for (const r of payload.receipts) {
      const grantId = r.kind === 'CHECK' && r.decision === 'ALLOW' ? r.detail.grantId : undefined
      if (typeof grantId === 'string')
        await stores.grants.markConsumed(r.tenantId, grantId, r.createdAt, r.receiptId)
    }
    for (const a of payload.actions) await stores.actions.insertIfAbsent(a)
    return receipts
  })
}
