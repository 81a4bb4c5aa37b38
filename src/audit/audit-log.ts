import type { Receipt, ReceiptDraft } from '../core/receipt.js'
import type { Stores, SystemOfRecord } from '../store/ports/index.js'

/**
 * The one append interface every path uses: checks, admin changes, execute, actions and
 * receipts drained from proxies. Appends are idempotent by receiptId.
 */
export interface AuditLog {
  /**
   * Appends in the caller's transaction: an administrative change and its receipt commit
   * together or not at all.
   */
  appendWith(stores: Stores, drafts: readonly ReceiptDraft[]): Promise<Receipt[]>
  /**
   * Appends on its own and resolves once the receipts are durable. Concurrent calls may
   * be group-committed into one transaction.
   */
  append(drafts: readonly ReceiptDraft[]): Promise<Receipt[]>
  /** Resolves when every append accepted so far is durable; used at shutdown. */
  flush(): Promise<void>
}

/** One transaction per call. The group-committing log (audit/group-commit.ts) replaces it under load. */
export function createDirectAuditLog(sor: SystemOfRecord): AuditLog {
  return {
    appendWith: (stores, drafts) => stores.receipts.append(drafts),
    append: (drafts) => sor.transaction((stores) => stores.receipts.append(drafts)),
    flush: async () => {},
  }
}
