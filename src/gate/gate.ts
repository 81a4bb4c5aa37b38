import { performance } from 'node:perf_hooks'
import type { Clock } from '../core/clock.js'
import { nowSeconds } from '../core/clock.js'
import {
  type CheckInput,
  type Evaluation,
  evaluate,
  type Outcome,
  settleGrant,
  standingOf,
  standingSince,
} from '../core/evaluate.js'
import { quotaPeriod, quotaResetsAt } from '../core/quota.js'
import type { Reason } from '../core/reasons.js'
import type { CompiledSnapshot } from '../core/snapshot.js'
import type { CommitRequest, CommitResult, DurablePayload, HotStore } from '../store/ports/hot-store.js'
import type { GateEvents } from './gate-events.js'
import type { SnapshotCache } from './snapshot-cache.js'

/**
 * What a request is, read under one snapshot: a write to decide (its verb and target, from
 * the system's routes), or something settled without a decision (a read that passes, a
 * refusal), with whatever the transport needs to act on it (`context`).
 */
export type Plan<C> =
  | { kind: 'decide'; verb: string; target: string | null; systemId: string | null; context: C }
  /** `confirm`: commit nothing, but only under the tenant's current version (a read that will carry a credential, a refusal that must not rest on an old route table). */
  | { kind: 'settle'; confirm: boolean; context: C }

export interface GateRequest<C = undefined> extends CheckInput {
  tenantId: string
  /** Which enrolled system the write is for (proxy and execute), for metrics and receipts. */
  systemId?: string | null
  /** Count this decision against the key's monthly check quota. */
  chargeQuota: boolean
  /**
   * Reads the request under each snapshot the gate tries, so a write is mapped to its verb by
   * the same routes its decision is committed under: a route change is linearizable like a
   * policy change. Without it, `verb`, `target` and `systemId` are the request's own.
   */
  plan?: (snapshot: CompiledSnapshot) => Plan<C>
  /**
   * Proxy path: what to make durable for an outcome (its receipts, and a staged action), so
   * the commit stores it in the same atomic step. The API path appends its receipt itself
   * (to answer with its seq).
   */
  durableFor?: (
    outcome: Outcome,
    snapshot: CompiledSnapshot,
    plan: Extract<Plan<C>, { kind: 'decide' }>,
  ) => DurablePayload
  /**
   * False while a STEP_UP could not be staged whole (the proxy has not read the body: it reads
   * one only for a write predicted STEP_UP). Such a decision is not committed; the caller reads
   * what it lacks and asks again.
   */
  mayStage?: () => boolean
}

export type Unavailable = {
  kind: 'unavailable'
  reason: 'no_snapshot' | 'store_unreachable' | 'commit_conflict'
}

export type GateResult<C = undefined> =
  | { kind: 'unknown_verb'; verb: string; context: C }
  | { kind: 'quota_exhausted'; limit: number; used: number; resetsAt: number; context: C }
  | Unavailable
  | {
      kind: 'decided'
      outcome: Outcome
      snapshot: CompiledSnapshot
      durable: DurablePayload | null
      quotaUsed: number | null
      /** The plan the write was decided under: its verb, target and system as that snapshot read them. */
      plan: Extract<Plan<C>, { kind: 'decide' }>
      context: C
    }
  /** The plan settled the request without a decision, under a snapshot (confirmed current when asked). */
  | { kind: 'settled'; snapshot: CompiledSnapshot; context: C }
  /** A STEP_UP its caller cannot stage yet (`mayStage`): nothing committed or counted. */
  | { kind: 'unstageable'; context: C }

export type StandingResult =
  | { kind: 'in_good_standing'; policyVersion: number }
  | { kind: 'barred'; reason: Reason; policyVersion: number }
  | Unavailable

/**
 * An evaluation made ahead of the commit, under the snapshot held then: the proxy's, to learn
 * whether a write may need its body staged. decide() reuses it only when it runs under that
 * same snapshot in the same second, when evaluating again would give the same answer.
 */
export interface Prediction<C = undefined> {
  /** The request it was made for: decide() reuses it for that very object only. */
  readonly req: GateRequest<C>
  readonly snapshot: CompiledSnapshot
  readonly now: number
  readonly plan: Plan<C>
  /** Null when the plan settled the request without a decision. */
  readonly evaluation: Evaluation | null
  readonly decideSeconds: number
}

export interface Gate {
  /** Evaluates `req` under the snapshot held now, without committing; null when there is none. */
  predict<C>(req: GateRequest<C>): Promise<Prediction<C> | null>
  /** `prediction` is reused only if predict() made it for this same request object. */
  decide<C>(req: GateRequest<C>, prediction?: Prediction<C> | null): Promise<GateResult<C>>
  /**
   * Is the key still allowed to act (not revoked, disabled, deleted or on the roster), judged
   * under a snapshot the hot store confirms is current? No quota, no grant, no mode. With
   * `issuedAt`, the standing of a credential issued then (a token, a lease), which a revocation
   * since its issue bars for good, even once lifted.
   */
  standing(tenantId: string, keyId: string, issuedAt?: number): Promise<StandingResult>
  /** Undo a committed decision whose receipt could not be made durable (API path). */
  release<C>(req: GateRequest<C>, result: Extract<GateResult<C>, { kind: 'decided' }>): Promise<void>
}

const MAX_ATTEMPTS = 5
/** Grant candidates the proxy path offers one commit (each carries its own receipts). */
const MAX_DURABLE_CANDIDATES = 8

/** What one attempt under a snapshot wants: either an answer now, or a commit to try. */
type Attempt<T> =
  | { done: T }
  | {
      commit: Omit<CommitRequest, 'tenantId' | 'version'>
      settle: (r: Extract<CommitResult, { status: 'committed' | 'quota_exhausted' }>) => T
    }

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

  const unavailable = (reason: Unavailable['reason']): Unavailable => {
    events.failedClosed({ reason })
    return { kind: 'unavailable', reason }
  }

  /** Runs `attempt` under the current snapshot until its commit lands on that same version. */
  async function underCurrentSnapshot<T>(
    tenantId: string,
    attempt: (snap: CompiledSnapshot) => Attempt<T>,
  ): Promise<T | Unavailable> {
    for (let i = 0; i < MAX_ATTEMPTS; i++) {
      let snap: CompiledSnapshot | null
      try {
        snap = await snapshots.get(tenantId)
      } catch {
        return unavailable('store_unreachable')
      }
      if (!snap) return unavailable('no_snapshot')
      const step = attempt(snap)
      if ('done' in step) return step.done
      let result: CommitResult
      try {
        result = await hot.commit({ tenantId, version: snap.version, ...step.commit })
      } catch {
        return unavailable('store_unreachable')
      }
      if (result.status !== 'stale') return step.settle(result)
      events.commitRetried({ tenantId })
      // No current version (Redis lost it): drop the entry whatever its version.
      snapshots.invalidate(tenantId, result.currentVersion ?? undefined)
    }
    return unavailable('commit_conflict')
  }

  /** The plan under `snap`, then (for a write) its evaluation, timed. */
  function planAndEvaluate<C>(snap: CompiledSnapshot, req: GateRequest<C>, now: number) {
    const plan: Plan<C> = req.plan
      ? req.plan(snap)
      : {
          kind: 'decide',
          verb: req.verb,
          target: req.target,
          systemId: req.systemId ?? null,
          context: undefined as C,
        }
    if (plan.kind === 'settle') return { plan, evaluation: null, decideSeconds: 0 }
    const t0 = performance.now()
    const input =
      plan.verb === req.verb && plan.target === req.target
        ? req
        : { ...req, verb: plan.verb, target: plan.target }
    const evaluation = evaluate(snap, input, now)
    return { plan, evaluation, decideSeconds: (performance.now() - t0) / 1000 }
  }

  const quotaFor = <C>(req: GateRequest<C>, now: number) =>
    req.chargeQuota ? { keyId: req.keyId, period: quotaPeriod(now), limit: deps.quotaLimit } : null

  return {
    async predict(req) {
      const snap = await snapshots.get(req.tenantId).catch(() => null)
      if (!snap) return null
      const now = nowSeconds(clock)
      return { req, snapshot: snap, now, ...planAndEvaluate(snap, req, now) }
    },

    decide<C>(req: GateRequest<C>, prediction?: Prediction<C> | null) {
      return underCurrentSnapshot<GateResult<C>>(req.tenantId, (snap) => {
        const now = nowSeconds(clock)
        const { plan, evaluation, decideSeconds } =
          prediction && prediction.req === req && prediction.snapshot === snap && prediction.now === now
            ? prediction
            : planAndEvaluate(snap, req, now)
        if (plan.kind === 'settle' || evaluation === null) {
          const settled = { kind: 'settled' as const, snapshot: snap, context: plan.context }
          if (plan.kind === 'settle' && !plan.confirm) return { done: settled }
          return { commit: { quota: null, grantCandidates: [] }, settle: () => settled }
        }
        const { context } = plan
        if (evaluation.kind === 'unknown_verb')
          return { done: { kind: 'unknown_verb', verb: evaluation.verb, context } }
        // Found in review: a write predicted otherwise, decided STEP_UP after a stale commit, was
        // staged without its body, an action no one could approve.
        if (
          evaluation.kind === 'decided' &&
          evaluation.outcome.decision === 'STEP_UP' &&
          req.mayStage?.() === false
        )
          return { done: { kind: 'unstageable', context } }
        const all = evaluation.kind === 'needs_grant' ? evaluation.candidates : []
        // Each candidate the commit may consume brings its own receipts, naming that grant, so
        // the proxy path offers only the best few. Past them the answer is DENY, never ALLOW.
        const candidates = req.durableFor ? all.slice(0, MAX_DURABLE_CANDIDATES) : all
        let durable: CommitRequest['durable']
        if (req.durableFor) {
          const durableFor = req.durableFor
          const otherwise = durableFor(settleGrant(evaluation, null), snap, plan)
          const ifGranted = candidates.map((c) => durableFor(settleGrant(evaluation, c.grantId), snap, plan))
          durable = ifGranted.length > 0 ? { otherwise, ifGranted } : { otherwise }
        }
        return {
          commit: { quota: quotaFor(req, now), grantCandidates: candidates, ...(durable ? { durable } : {}) },
          settle: (result) => {
            if (result.status === 'quota_exhausted') {
              return {
                kind: 'quota_exhausted',
                limit: result.limit,
                used: Math.min(result.used, result.limit),
                resetsAt: quotaResetsAt(now),
                context,
              }
            }
            const outcome = settleGrant(evaluation, result.grantId)
            events.decided({
              decision: outcome.decision,
              verb: outcome.verb,
              system: plan.systemId,
              decideSeconds,
            })
            return {
              kind: 'decided',
              outcome,
              snapshot: snap,
              durable: result.durable,
              quotaUsed: result.quotaUsed,
              plan,
              context,
            }
          },
        }
      })
    },

    standing(tenantId, keyId, issuedAt) {
      return underCurrentSnapshot<StandingResult>(tenantId, (snap) => {
        const barred = issuedAt === undefined ? standingOf(snap, keyId) : standingSince(snap, keyId, issuedAt)
        return {
          commit: { quota: null, grantCandidates: [] },
          settle: () =>
            barred
              ? { kind: 'barred', reason: barred.reason, policyVersion: snap.version }
              : { kind: 'in_good_standing', policyVersion: snap.version },
        }
      })
    },

    async release(req, result) {
      await hot.release(req.tenantId, quotaFor(req, nowSeconds(clock)), result.outcome.grantId)
    },
  }
}
