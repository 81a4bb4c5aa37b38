import type { Storage } from '../../src/store/ports/storage.js'
import { createFakeCheckpointStore } from './fake-checkpoint-store.js'
import { FakeDatabase } from './fake-database.js'
import { createFakeManifestStore } from './fake-manifest-store.js'
import { createFakeReceiptReader } from './fake-receipt-reader.js'
import { createFakeSnapshotSource } from './fake-snapshot-source.js'
import { createFakeSystemOfRecord } from './fake-system-of-record.js'

/** The control plane's storage in memory, for service tests (ControlPlaneOverrides.storage). */
export function createFakeStorage(db = new FakeDatabase()): Storage & { db: FakeDatabase } {
  const ctx = { db, tx: null }
  return {
    kind: 'fake',
    db,
    sor: createFakeSystemOfRecord(db),
    snapshots: createFakeSnapshotSource(db),
    receipts: createFakeReceiptReader(ctx),
    checkpoints: createFakeCheckpointStore(ctx),
    manifests: createFakeManifestStore(ctx),
    async ping() {},
  }
}
