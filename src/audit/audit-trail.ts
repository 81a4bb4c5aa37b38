import type { KeyObject } from 'node:crypto'
import type { AuditServices } from '../control/audit-routes.js'
import type { Clock } from '../core/clock.js'
import type { Logger } from '../observability/logger.js'
import type { Storage } from '../store/ports/storage.js'
import type { AuditLog } from './audit-log.js'
import { createCheckpointer } from './checkpointer.js'
import { type AppendPath, createGroupCommitAuditLog } from './group-commit.js'
import { createReceiptWakeups } from './receipt-wakeups.js'
import { createStreamSlots } from './stream-slots.js'

export interface AuditTrail {
  /** The append interface every path uses (group-committed). */
  readonly log: AuditLog
  readonly services: AuditServices
  /** Drains pending appends, anchors the final heads, stops timers and the listener. */
  close(): Promise<void>
}

export interface AuditTrailOptions {
  storage: Storage
  signingKey: KeyObject
  clock: Clock
  logger: Logger
  checkpointIntervalMs: number
  streamKeepaliveMs: number
  /** Fallback poll of subscribed tenants' heads, in case a wake-up is lost. */
  streamPollMs?: number
  publicUrl?: string | undefined
  /** How many receipts the group commit stored by which path (a metric). */
  onAppendPath?: (path: AppendPath, receipts: number) => void
}

/** Builds the audit log's writer, checkpointer, stream wake-ups and read stores; starts the checkpoint cadence. */
export function createAuditTrail(opts: AuditTrailOptions): AuditTrail {
  const { receipts: reader, checkpoints, listen } = opts.storage
  const wakeups = createReceiptWakeups({
    reader,
    pollMs: opts.streamPollMs ?? 500,
    logger: opts.logger,
    ...(listen ? { listen } : {}),
  })
  const log = createGroupCommitAuditLog({
    sor: opts.storage.sor,
    onCommitted: (ids) => wakeups.committed(ids),
    ...(opts.onAppendPath ? { onPath: opts.onAppendPath } : {}),
  })
  const checkpointer = createCheckpointer({
    checkpoints,
    reader,
    signingKey: opts.signingKey,
    clock: opts.clock,
    intervalMs: opts.checkpointIntervalMs,
    logger: opts.logger,
  })
  checkpointer.start()
  return {
    log,
    services: {
      reader,
      checkpoints,
      checkpointer,
      wakeups,
      signingKey: opts.signingKey,
      manifests: opts.storage.manifests,
      streamKeepaliveMs: opts.streamKeepaliveMs,
      streamSlots: createStreamSlots(),
      publicUrl: opts.publicUrl,
    },
    async close() {
      await log.flush()
      await checkpointer.stop()
      await wakeups.close()
    },
  }
}
