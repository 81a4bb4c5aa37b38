import type { CheckpointStore } from './checkpoints.js'
import type { SnapshotSource } from './decision-state.js'
import type { SystemOfRecord } from './index.js'
import type { ManifestStore } from './manifests.js'
import type { ReceiptReader } from './receipt-reader.js'

/** Subscribes to receipts committed by other processes (the tenant id of each); resolves to an unsubscribe. */
export type ReceiptListener = (
  onTenant: (tenantId: string) => void,
  onListen: () => void,
) => Promise<() => Promise<void>>

/**
 * Everything the control plane keeps durably, behind the interfaces its services use: built once
 * in the composition root from the configured database (store/postgres/storage.ts), or a fake in
 * service tests. Nothing past the root sees a SQL handle.
 */
export interface Storage {
  /** What it runs on, for the start-up log: `postgres`, `pglite-disk`, `pglite-memory`. */
  readonly kind: string
  readonly sor: SystemOfRecord
  readonly snapshots: SnapshotSource
  readonly receipts: ReceiptReader
  readonly checkpoints: CheckpointStore
  readonly manifests: ManifestStore
  /** Wake-ups for receipts other processes commit; absent where this process is the only writer. */
  readonly listen?: ReceiptListener
  /** Resolves when storage answers (readiness). */
  ping(): Promise<void>
}
