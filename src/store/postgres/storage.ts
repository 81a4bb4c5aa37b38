import type { Storage } from '../ports/storage.js'
import { createCheckpointStore } from './checkpoint-store.js'
import type { Database } from './connect.js'
import { createManifestStore } from './manifest-store.js'
import { listenForReceipts } from './receipt-notifications.js'
import { createReceiptReader } from './receipt-reader.js'
import { createSnapshotSource } from './snapshot-source.js'
import { createSystemOfRecord } from './system-of-record.js'

/** The control plane's storage on one database: a Postgres server, or PGlite on disk or in memory. */
export function createPostgresStorage(db: Database): Storage {
  return {
    kind: db.kind,
    sor: createSystemOfRecord(db),
    snapshots: createSnapshotSource(db),
    receipts: createReceiptReader(db.sql),
    checkpoints: createCheckpointStore(db.sql),
    manifests: createManifestStore(db.sql),
    // Only a database other processes write needs LISTEN; PGlite is one process (and one
    // connection, which LISTEN would tie up), so in-process wake-ups cover it.
    ...(db.shared ? { listen: listenForReceipts(db.sql) } : {}),
    async ping() {
      await db.sql`select 1`
    },
  }
}
