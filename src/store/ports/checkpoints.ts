import type { SignedCheckpoint } from '../../core/checkpoint.js'
import type { ChainHead } from '../../core/receipt.js'

/** Signed checkpoints of tenants' chain heads. */
export interface CheckpointStore {
  /**
   * Tenants whose current head (seq > 0) has no checkpoint yet, in tenant-id order after
   * `afterTenantId` (pass '' to start), at most `limit`.
   */
  unanchoredHeads(afterTenantId: string, limit: number): Promise<(ChainHead & { tenantId: string })[]>
  /** Stores checkpoints. One already stored at the same (tenant, seq) wins, so replicas may race. */
  save(checkpoints: readonly SignedCheckpoint[]): Promise<void>
  at(tenantId: string, seq: number): Promise<SignedCheckpoint | null>
  latest(tenantId: string): Promise<SignedCheckpoint | null>
  /** Checkpoints with afterSeq < seq <= toSeq, in seq order, at most `limit`. */
  range(tenantId: string, afterSeq: number, toSeq: number, limit: number): Promise<SignedCheckpoint[]>
}
