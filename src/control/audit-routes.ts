import type { KeyObject } from 'node:crypto'
import type { FastifyInstance } from 'fastify'
import type { AuditLog } from '../audit/audit-log.js'
import type { Checkpointer } from '../audit/checkpointer.js'
import type { ReceiptWakeups } from '../audit/receipt-wakeups.js'
import type { StreamSlots } from '../audit/stream-slots.js'
import type { Clock } from '../core/clock.js'
import type { Authenticator } from '../identity/authenticator.js'
import type { PortalSessions } from '../portal/portal-sessions.js'
import type { CheckpointStore } from '../store/ports/checkpoints.js'
import type { SystemOfRecord } from '../store/ports/index.js'
import type { ManifestStore } from '../store/ports/manifests.js'
import type { RateLimitStore } from '../store/ports/rate-limit.js'
import type { ReceiptReader } from '../store/ports/receipt-reader.js'
import { auditKeyRoutes } from './audit-key.js'
import { badgeRoutes } from './badge.js'
import { manifestsRoutes } from './manifests.js'
import { receiptsRoutes } from './receipts.js'

/** What the audit-facing routes (receipts, badge, manifests, audit key) need, built by the composition root. */
export interface AuditServices {
  reader: ReceiptReader
  checkpoints: CheckpointStore
  checkpointer: Checkpointer
  wakeups: ReceiptWakeups
  signingKey: KeyObject
  manifests: ManifestStore
  streamKeepaliveMs: number
  /** Open receipt streams, API and portal together (stream-slots.ts). */
  streamSlots: StreamSlots
  publicUrl?: string | undefined
}

export async function registerAuditRoutes(
  app: FastifyInstance,
  audit: AuditServices,
  s: {
    sor: SystemOfRecord
    auth: Authenticator
    rateLimits: RateLimitStore
    clock: Clock
    auditLog: AuditLog
    portalSessions: PortalSessions | null
  },
): Promise<void> {
  await app.register(
    receiptsRoutes({
      auth: s.auth,
      sor: s.sor,
      reader: audit.reader,
      checkpoints: audit.checkpoints,
      checkpointer: audit.checkpointer,
      wakeups: audit.wakeups,
      publicKey: audit.signingKey,
      clock: s.clock,
      streamKeepaliveMs: audit.streamKeepaliveMs,
      streamSlots: audit.streamSlots,
      portalSessions: s.portalSessions,
    }),
  )
  await app.register(
    badgeRoutes({
      auth: s.auth,
      audit: s.auditLog,
      sor: s.sor,
      reader: audit.reader,
      rateLimits: s.rateLimits,
      clock: s.clock,
      publicUrl: audit.publicUrl,
    }),
  )
  await app.register(manifestsRoutes({ auth: s.auth, manifests: audit.manifests }))
  await app.register(auditKeyRoutes({ signingKey: audit.signingKey }))
}
