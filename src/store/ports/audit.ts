import type { Receipt, ReceiptDraft } from '../../core/receipt.js'

/** The per-tenant hash-chained receipt log. */
export interface ReceiptStore {
  /**
   * Appends drafts to their tenants' chains inside the current transaction: locks each
   * tenant's head row (in tenant-id order, so batches never deadlock), takes the next
   * seq values and hashes. Drafts whose receiptId is already stored are skipped and the
   * stored receipt is returned in their place (appends are idempotent by receiptId).
   */
  append(drafts: readonly ReceiptDraft[]): Promise<Receipt[]>
  get(tenantId: string, receiptId: string): Promise<Receipt | null>
  list(tenantId: string, afterSeq: number, limit: number): Promise<Receipt[]>
  /** CHECK receipts per tenant and key since a time: what the quota counters must be at least. */
  checkCountsSince(
    sinceSeconds: number,
    tenantId?: string,
  ): Promise<{ tenantId: string; keyId: string; count: number }[]>
}
