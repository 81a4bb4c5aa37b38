import type { ChainHead, Receipt, ReceiptDraft } from '../../core/receipt.js'

/** Receipts of one tenant, already chained in memory from `from` to `to` (core chainReceipts). */
export interface ChainedReceipts {
  tenantId: string
  from: ChainHead
  to: ChainHead
  receipts: readonly Receipt[]
  /**
   * The JCS text each receipt's hash was computed over, in the same order: chainReceipts's
   * output, which the store writes into its statement as JSON, verbatim.
   */
  bodies: readonly string[]
}

/** The per-tenant hash-chained receipt log. */
export interface ReceiptStore {
  /**
   * Appends drafts to their tenants' chains inside the current transaction: locks each
   * tenant's head row (in tenant-id order, so batches never deadlock), takes the next
   * seq values and hashes. Drafts whose receiptId is already stored are skipped and the
   * stored receipt is returned in their place (appends are idempotent by receiptId).
   */
  append(drafts: readonly ReceiptDraft[]): Promise<Receipt[]>
  /**
   * Stores receipts chained in memory, in one statement (atomic on its own), for every tenant
   * whose head row still stands at `from`: those heads move to `to`. Tenants whose head has
   * moved are left untouched and returned as `stale`. Throws, writing nothing, if a receiptId
   * of a tenant still at `from` is already stored, or if a batch's receipts do not run link
   * by link from `from` to `to`. The group commit's fast path: one round trip instead of four.
   */
  appendChained(batches: readonly ChainedReceipts[]): Promise<{ stale: string[] }>
  get(tenantId: string, receiptId: string): Promise<Receipt | null>
  list(tenantId: string, afterSeq: number, limit: number): Promise<Receipt[]>
  /** CHECK receipts per tenant and key since a time: what the quota counters must be at least. */
  checkCountsSince(
    sinceSeconds: number,
    tenantId?: string,
  ): Promise<{ tenantId: string; keyId: string; count: number }[]>
}
