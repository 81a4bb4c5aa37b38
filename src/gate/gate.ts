import { performance } from 'node:perf_hooks'
import type { Clock } from '../core/clock.js'
import { nowSeconds } from '../core/clock.js'
import { type CheckInput, evaluate, type Outcome, settleGrant } from '../core/evaluate.js'
import { quotaPeriod, quotaResetsAt } from '../core/quota.js'
import type { ReceiptDraft } from '../core/receipt.js'
import type { CompiledSnapshot } from '../core/snapshot.js'
import type { HotStore } from '../store/ports/hot-store.js'
import type { GateEvents } from './gate-events.js'
import type { SnapshotCache } from './snapshot-cache.js'

export interface GateRequest extends CheckInput {
  tenantId: string
  /** Which enrolled system the write is for (proxy and execute), for metrics and receipts. */
  systemId?: string | null
  /** Count this decision against the key's monthly check quota. */
  chargeQuota: boolean
  /**
   * Proxy path: build the receipt for an outcome, so the commit makes it durable in the same
   * atomic step. The API path appends its receipt itself (to answer with its seq).
   */
  receiptFor?: (outcome: Outcome, snapshot: CompiledSnapshot) => ReceiptDraft
}

export type GateResult =
  | { kind: 'unknown_verb'; verb: string }
  | { kind: 'quota_exhausted'; limit: number; used: number; resetsAt: number }
  | { kind: 'unavailable'; reason: 'no_snapshot' | 'store_unreachable' | 'commit_conflict' }
  | {
      kind: 'decided'
      outcome: Outcome
      snapshot: CompiledSnapshot
      receipt: ReceiptDraft | null
      quotaUsed: number | null
    }

export interface Gate {
  decide(req: GateRequest): Promise<GateResult>
  /** Undo a committed decision whose receipt could not be made durable (API path). */
  release(req: GateRequest, result: Extract<GateResult, { kind: 'decided' }>): Promise<void>
}

const MAX_ATTEMPTS = 5

/**
 * The one decision pipeline, shared by POST /v1/check, the proxy, execute and approvals:
 * decide in-process from the snapshot (pure core), then commit atomically to the hot
 * store, which checks the snapshot is still current, counts quota and consumes a grant.
 * A stale snapshot is refreshed and the decision made again, so no decision is ever
 * committed under a state older than the last acknowledged change.
 */
export function createGate(deps: {
  hot: HotStore
  snapshots: SnapshotCache
  clock: Clock
  quotaLimit: number
  events: GateEvents
}): Gate {
  const { hot, snapshots, clock, events } = deps
  return {
    async decide(req) {
      for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
        let snap: CompiledSnapshot | null
        try {
          snap = await snapshots.get(req.tenantId)
        } catch {
          events.failedClosed({ reason: 'store_unreachable' })
          return { kind: 'unavailable', reason: 'store_unreachable' }
        }
        if (!snap) {
          events.failedClosed({ reason: 'no_snapshot' })
          return { kind: 'unavailable', reason: 'no_snapshot' }
        }
        const now = nowSeconds(clock)
        const t0 = performance.now()
        const evaluation = evaluate(snap, req, now)
        const decideSeconds = (performance.now() - t0) / 1000
        if (evaluation.kind === 'unknown_verb') return { kind: 'unknown_verb', verb: evaluation.verb }

        const candidates = evaluation.kind === 'needs_grant' ? evaluation.candidates : []
        const quota = req.chargeQuota
          ? { keyId: req.keyId, period: quotaPeriod(now), limit: deps.quotaLimit }
          : null
        let receipt: { otherwise: ReceiptDraft; ifGranted?: ReceiptDraft } | undefined
        if (req.receiptFor) {
          const s = snap
          receipt = { otherwise: req.receiptFor(settleGrant(evaluation, null), s) }
          if (evaluation.kind === 'needs_grant')
            receipt.ifGranted = req.receiptFor(settleGrant(evaluation, candidates[0] ?? null), s)
        }
        let result: Awaited<ReturnType<HotStore['commit']>>
        try {
          result = await hot.commit({
            tenantId: req.tenantId,
            version: snap.version,
            quota,
            grantCandidates: candidates,
            ...(receipt ? { receipt } : {}),
          })
        } catch {
          events.failedClosed({ reason: 'store_unreachable' })
          return { kind: 'unavailable', reason: 'store_unreachable' }
        }
        if (result.status === 'stale') {
          events.commitRetried({ tenantId: req.tenantId })
          snapshots.invalidate(req.tenantId, result.currentVersion ?? undefined)
          if (result.currentVersion === null) snapshots.invalidate(req.tenantId)
          continue
        }
        if (result.status === 'quota_exhausted') {
          return {
            kind: 'quota_exhausted',
            limit: result.limit,
            used: Math.min(result.used, result.limit),
            resetsAt: quotaResetsAt(now),
          }
        }
        const outcome = settleGrant(evaluation, result.grantId)
        events.decided({
          decision: outcome.decision,
          verb: outcome.verb,
          system: req.systemId ?? null,
          decideSeconds,
        })
        return {
          kind: 'decided',
          outcome,
          snapshot: snap,
          receipt: result.receipt,
          quotaUsed: result.quotaUsed,
        }
      }
      events.failedClosed({ reason: 'commit_conflict' })
      return { kind: 'unavailable', reason: 'commit_conflict' }
    },

    async release(req, result) {
      const now = nowSeconds(clock)
      const quota = req.chargeQuota
        ? { keyId: req.keyId, period: quotaPeriod(now), limit: deps.quotaLimit }
        : null
      await hot.release(req.tenantId, quota, result.outcome.grantId)
    },
  }
}
