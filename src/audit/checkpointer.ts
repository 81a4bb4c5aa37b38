import type { KeyObject } from 'node:crypto'
import { type SignedCheckpoint, signCheckpoint } from '../core/checkpoint.js'
import { type Clock, nowSeconds } from '../core/clock.js'
import { publicKeyId } from '../core/ed25519.js'
import type { Logger } from '../observability/logger.js'
import type { CheckpointStore } from '../store/ports/checkpoints.js'
import type { ReceiptReader } from '../store/ports/receipt-reader.js'

export interface Checkpointer {
  /** Signs and stores a checkpoint of every tenant head that has none yet; returns how many. */
  runOnce(): Promise<number>
  /**
   * The checkpoint of the tenant's current head, made now unless one exists (one signed by
   * another key is signed again for the caller, not stored); null for an empty log.
   */
  checkpointTenant(tenantId: string): Promise<SignedCheckpoint | null>
  /** Starts the fixed cadence. */
  start(): void
  /** Stops the cadence, waits for a run in progress, then anchors the final heads once more. */
  stop(): Promise<void>
}

export interface CheckpointerDeps {
  checkpoints: CheckpointStore
  reader: ReceiptReader
  signingKey: KeyObject
  clock: Clock
  intervalMs: number
  logger: Logger
  /** Tenants signed per page of a run. */
  pageSize?: number
}

/**
 * Signs tenants' chain heads on a fixed cadence, whether or not anything is happening,
 * so the latest receipts are anchored within one interval even when traffic stops. A
 * head already checkpointed (by this or another replica) is skipped; the store keeps the
 * first checkpoint of each (tenant, seq), so replicas racing on one head agree.
 */
export function createCheckpointer(deps: CheckpointerDeps): Checkpointer {
  const pageSize = deps.pageSize ?? 500
  const keyId = publicKeyId(deps.signingKey)
  let timer: NodeJS.Timeout | null = null
  let running: Promise<number> | null = null

  async function run(): Promise<number> {
    let after = ''
    let made = 0
    for (;;) {
      const heads = await deps.checkpoints.unanchoredHeads(after, pageSize)
      if (heads.length === 0) return made
      const at = nowSeconds(deps.clock)
      await deps.checkpoints.save(heads.map((h) => signCheckpoint(deps.signingKey, { ...h, at })))
      made += heads.length
      after = (heads.at(-1) as (typeof heads)[number]).tenantId
      if (heads.length < pageSize) return made
    }
  }

  function runOnce(): Promise<number> {
    // One run at a time per process; a tick that finds one running joins it.
    if (!running) {
      running = run().finally(() => {
        running = null
      })
    }
    return running
  }

  return {
    runOnce,
    async checkpointTenant(tenantId) {
      const head = await deps.reader.head(tenantId)
      if (head.seq === 0) return null
      const existing = await deps.checkpoints.at(tenantId, head.seq)
      if (existing && existing.keyId === keyId) return existing
      if (existing) {
        // Signed by a key rotated out since: an export of an idle tenant carried it, and failed
        // verification with the published key (found in review). The same head is signed again
        // with the current key, for the caller only: the stored one stays, as evidence, and a
        // head that disagrees with it (the chain rewritten since) is never signed again.
        return existing.hash === head.hash
          ? signCheckpoint(deps.signingKey, { tenantId, ...head, at: nowSeconds(deps.clock) })
          : existing
      }
      await deps.checkpoints.save([
        signCheckpoint(deps.signingKey, { tenantId, ...head, at: nowSeconds(deps.clock) }),
      ])
      return deps.checkpoints.at(tenantId, head.seq)
    },
    start() {
      if (timer) return
      timer = setInterval(() => {
        runOnce().catch((err) => deps.logger.error({ err }, 'audit checkpoint failed'))
      }, deps.intervalMs)
      timer.unref()
    },
    async stop() {
      if (timer) clearInterval(timer)
      timer = null
      await running?.catch(() => {})
      await runOnce().catch((err) => deps.logger.warn({ err }, 'final audit checkpoint failed'))
    },
  }
}
