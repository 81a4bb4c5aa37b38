import type { StoredReceiptRow } from '../../core/chain-verifier.js'
import type { ChainHead } from '../../core/receipt.js'

export interface DecisionCounts {
  /** Receipts counted per decision value (REVOKE receipts under REVOKE, CHECK receipts by decision). */
  byDecision: Record<string, number>
  /** True when more than `cap` receipts were in the window: the counts are then a floor. */
  truncated: boolean
}

/**
 * Read side of the audit log for verification, export, streaming and aggregates. Every
 * method reads committed rows only and never loads more than one page at a time.
 */
export interface ReceiptReader {
  /** The tenant's recorded head (seq 0 when nothing was ever written). */
  head(tenantId: string): Promise<ChainHead>
  /** Head seqs of several tenants at once (tenants with no log are left out). */
  headSeqs(tenantIds: readonly string[]): Promise<Map<string, number>>
  /** Stored rows with afterSeq < seq <= toSeq, in seq order, at most `limit`. */
  rows(tenantId: string, afterSeq: number, toSeq: number, limit: number): Promise<StoredReceiptRow[]>
  /** CHECK receipts by decision and REVOKE receipts created at or after `since`, the most recent `cap` of them. */
  decisionCounts(tenantId: string, since: number, cap: number): Promise<DecisionCounts>
  /**
   * CHECK and EXECUTE receipts with a decision, created at or after `since`, except an execute's
   * outcome receipt (`detail.phase: 'completed'`): its write is counted by its authorising receipt.
   */
  gatedWrites(tenantId: string, since: number): Promise<number>
}
