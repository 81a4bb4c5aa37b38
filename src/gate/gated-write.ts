import type { AuditLog } from '../audit/audit-log.js'
import type { Clock } from '../core/clock.js'
import { nowSeconds } from '../core/clock.js'
import { ERRORS, type ErrorDef } from '../core/errors.js'
import type { Decision, Outcome } from '../core/evaluate.js'
import { newId } from '../core/ids.js'
import { draft, type ReceiptDraft } from '../core/receipt.js'
import type { CompiledSnapshot } from '../core/snapshot.js'
import type { Environment } from '../core/verbs.js'
import type { DurablePayload } from '../store/ports/hot-store.js'
import type { Lease, PendingAction, SystemOfRecord } from '../store/ports/index.js'
import type { Gate, GateRequest, Plan, Prediction } from './gate.js'

/** Which transport a gated write came through; recorded on its receipts as `detail.via`. */
export type Via = 'api' | 'proxy' | 'mcp' | 'graphql'

/** A write a STEP_UP stages for approval: the pending action and its ACTION_STAGED receipt. */
export interface Staged {
  action: PendingAction
  receipt: ReceiptDraft
}

/** What an ALLOW adds to its CHECK receipt and answer: an API check's token and lease, say. */
export interface AllowExtras {
  detail: Record<string, unknown>
  lease: Omit<Lease, 'usedAt'> | null
  answer: Record<string, unknown>
}

/** The decided write, as its plan read it under the snapshot it was committed under. */
export type DecidedPlan<C> = Extract<Plan<C>, { kind: 'decide' }>

/**
 * One gated write, whatever brought it (the API, the HTTP proxy, an MCP tool call, a GraphQL
 * mutation): who writes, where, under which verb (read from the system's routes under each
 * snapshot tried), and what its receipts must say. An approval is not a new write: it completes
 * one this step staged, re-deciding through the gate (`gate.decide`, no quota) and recording
 * its answer as the approval's and the execution's receipts (approval-service.ts), never a
 * second CHECK.
 */
export interface GatedWrite<C> {
  tenantId: string
  keyId: string
  environment: Environment | null
  grantId: string | null
  via: Via
  /** Counted against the key's monthly check quota (every write; not a read settled without a decision). */
  chargeQuota: boolean
  /** The verb the caller named (an API check), or '' when the plan supplies it. */
  verb: string
  target: string | null
  systemId: string | null
  plan?: (snapshot: CompiledSnapshot) => Plan<C>
  /**
   * Where the receipts become durable: `hot` in the same atomic commit as the decision (the
   * proxy paths, which answer without Postgres); `audit` in the Postgres chain before the
   * answer (the API, which answers with the receipt's `seq`).
   */
  recorder: 'hot' | 'audit'
  /** The request the decision is about, for the CHECK receipt: method, path and the body's digest. */
  request?: (plan: DecidedPlan<C>) => Record<string, unknown> | null
  /** More for the CHECK receipt's `detail` (the transport's own: the MCP tool, the GraphQL field). */
  detail?: (plan: DecidedPlan<C>) => Record<string, unknown>
  /** What a STEP_UP stages, given the CHECK receipt that decided it; null stages nothing. */
  stage?: (outcome: Outcome, plan: DecidedPlan<C>, checkReceiptId: string, at: number) => Staged | null
  /**
   * False while `stage` could not stage a STEP_UP whole (the proxy reads a body only for a write
   * it predicts STEP_UP). Such a decision is not committed: `readForStaging` reads what it lacks
   * (throwing if it cannot: the transport answers), and the write is decided again.
   */
  mayStage?: () => boolean
  readForStaging?: () => Promise<void>
  /** What an ALLOW adds (a lease, a token); API checks only. */
  onAllow?: (outcome: Outcome, plan: DecidedPlan<C>, at: number) => AllowExtras
}

/** Refused before or instead of a decision: no receipt, nothing counted. */
export interface Refusal {
  def: ErrorDef
  detail: Record<string, unknown>
}

/** The one answer every transport renders. */
export type WriteAnswer<C> =
  | {
      kind: 'decided'
      decision: Decision
      outcome: Outcome
      plan: DecidedPlan<C>
      context: C
      receiptId: string
      /** The receipt's place in the chain when the API path appended it; null on the proxy paths (drained later). */
      seq: number | null
      actionId: string | null
      /** An ALLOW's extras (the API check's token and lease). */
      extras: Record<string, unknown>
    }
  /** The plan settled the request without a decision (a read that passes, a refusal of its own). */
  | { kind: 'settled'; context: C; snapshot: CompiledSnapshot }
  | { kind: 'refused'; refusal: Refusal; context: C | null }

export interface GatedWrites {
  /** The current snapshot's reading of the write, without committing (the proxy's, to read a body first). */
  predict<C>(write: GatedWrite<C>): Promise<Prediction<C> | null>
  run<C>(write: GatedWrite<C>, prediction?: Prediction<C> | null): Promise<WriteAnswer<C>>
}

interface Built {
  payload: DurablePayload & { leases: Omit<Lease, 'usedAt'>[] }
  extras: Record<string, unknown>
}

/**
 * A CHECK receipt's `detail`, filled in place (no temporary object per optional field: this
 * runs for every gated write). Later fields win, as in the order below.
 */
function checkDetail<C>(
  write: GatedWrite<C>,
  plan: DecidedPlan<C>,
  outcome: Outcome,
  request: Record<string, unknown> | null,
  staged: Staged | null,
  allow: AllowExtras | null,
): Record<string, unknown> {
  const detail: Record<string, unknown> = {}
  if (write.via !== 'api') detail.via = write.via
  if (plan.systemId) detail.systemId = plan.systemId
  if (request) detail.request = request
  if (write.detail) Object.assign(detail, write.detail(plan))
  detail.mode = outcome.mode
  detail.provenance = outcome.provenance
  detail.layers = outcome.layers
  if (outcome.grantId) detail.grantId = outcome.grantId
  if (staged) detail.actionId = staged.action.actionId
  if (allow) Object.assign(detail, allow.detail)
  return detail
}

/**
 * The one gated-write step (the model: Ory Oathkeeper's decision API and proxy sharing one
 * handler; Envoy ext_authz's response struct): decide and commit through the gate, build the
 * CHECK receipt (and any staged action and ALLOW extras) one way for every transport, make them
 * durable where the transport needs them, and answer in one typed shape. Transports render it.
 */
export function createGatedWrites(deps: {
  gate: Gate
  clock: Clock
  /** The Postgres chain, for writes recorded `audit` (the control plane's); a proxy has none. */
  auditChain?: { sor: SystemOfRecord; log: AuditLog }
}): GatedWrites {
  const { gate, clock } = deps

  function build<C>(write: GatedWrite<C>, outcome: Outcome, plan: DecidedPlan<C>): Built {
    const at = nowSeconds(clock)
    const receiptId = newId('receipt')
    const staged =
      outcome.decision === 'STEP_UP' && write.stage ? write.stage(outcome, plan, receiptId, at) : null
    const allow = outcome.decision === 'ALLOW' && write.onAllow ? write.onAllow(outcome, plan, at) : null
    const request = write.request?.(plan) ?? null
    const check = draft({
      receiptId,
      tenantId: write.tenantId,
      kind: 'CHECK',
      decision: outcome.decision,
      createdAt: at,
      verb: outcome.verb,
      requestedVerb: plan.verb,
      target: plan.target,
      environment: write.environment,
      principalId: outcome.principalId,
      principalName: outcome.principalName,
      keyId: write.keyId,
      reason: outcome.reason,
      policyVersion: outcome.policyVersion,
      detail: checkDetail(write, plan, outcome, request, staged, allow),
    })
    return {
      payload: {
        receipts: staged ? [check, staged.receipt] : [check],
        actions: staged ? [staged.action] : [],
        leases: allow?.lease ? [allow.lease] : [],
      },
      extras: allow?.answer ?? {},
    }
  }

  /** After a failed persist: the receipt's seq if it was stored after all, 'absent', or null (unknown). */
  async function storedSeq(payload: Built['payload'], tenantId: string): Promise<number | 'absent' | null> {
    const receiptId = payload.receipts[0]?.receiptId
    if (!deps.auditChain || !receiptId) return null
    try {
      const found = await deps.auditChain.sor.stores.receipts.get(tenantId, receiptId)
      return found ? found.seq : 'absent'
    } catch {
      return null
    }
  }

  /** The API path: the receipt (and what it promises) in the Postgres chain before the answer. */
  async function persist(payload: Built['payload'], tenantId: string, at: number): Promise<number> {
    if (!deps.auditChain)
      throw new Error('no audit chain in this process: record gated writes in the hot store')
    const { sor, log: audit } = deps.auditChain
    const { receipts, actions, leases } = payload
    const grantId = receipts[0]?.detail.grantId
    if (actions.length === 0 && leases.length === 0 && typeof grantId !== 'string')
      return (await audit.append(receipts))[0]?.seq as number
    // The receipt and what it promises (a lease, a pending action, a grant's use) commit together.
    const stored = await sor.transaction(async (stores) => {
      for (const l of leases) await stores.leases.insert(l)
      for (const a of actions) await stores.actions.insert(a)
      if (typeof grantId === 'string')
        await stores.grants.markConsumed(tenantId, grantId, at, receipts[0]?.receiptId as string)
      return audit.appendWith(stores, receipts)
    })
    return stored[0]?.seq as number
  }

  function gateRequestOf<C>(write: GatedWrite<C>): GateRequest<C> {
    return {
      tenantId: write.tenantId,
      keyId: write.keyId,
      verb: write.verb,
      target: write.target,
      systemId: write.systemId,
      environment: write.environment,
      grantId: write.grantId,
      chargeQuota: write.chargeQuota,
      ...(write.plan ? { plan: write.plan } : {}),
      mayStage: write.mayStage,
      // The proxy paths: the commit makes the payload for its outcome durable in the same step.
      ...(write.recorder === 'hot'
        ? {
            durableFor: (outcome: Outcome, _snap: CompiledSnapshot, plan: DecidedPlan<C>) =>
              build(write, outcome, plan).payload,
          }
        : {}),
    }
  }

  const writes: GatedWrites = {
    predict(write) {
      return gate.predict(gateRequestOf(write))
    },

    async run<C>(write: GatedWrite<C>, prediction?: Prediction<C> | null): Promise<WriteAnswer<C>> {
      // A prediction made for this write carries its gate request: handing the same one back
      // lets the gate reuse the evaluation while the snapshot is unchanged.
      const req = prediction?.req ?? gateRequestOf(write)
      const result = await gate.decide(req, prediction)
      switch (result.kind) {
        case 'unavailable':
          return { kind: 'refused', refusal: { def: ERRORS.gateUnavailable, detail: {} }, context: null }
        case 'quota_exhausted':
          return {
            kind: 'refused',
            refusal: {
              def: ERRORS.quotaExhausted,
              detail: { limit: result.limit, used: result.used, resetsAt: result.resetsAt },
            },
            context: result.context,
          }
        case 'unknown_verb':
          return {
            kind: 'refused',
            refusal: { def: ERRORS.unknownVerb, detail: { verbs: [result.verb] } },
            context: result.context,
          }
        case 'settled':
          return { kind: 'settled', context: result.context, snapshot: result.snapshot }
        case 'unstageable':
          // Once: after the read, mayStage holds, so a second run stages whatever it decides.
          if (!write.readForStaging || !write.mayStage) throw new Error('unstageable without readForStaging')
          await write.readForStaging()
          if (!write.mayStage()) throw new Error('readForStaging left the write unstageable')
          return writes.run(write)
        case 'decided': {
          const { outcome } = result
          const plan: DecidedPlan<C> = result.plan
          let payload: DurablePayload
          let extras: Record<string, unknown> = {}
          let seq: number | null = null
          if (write.recorder === 'hot' && result.durable) {
            // The commit made one of the payloads it was offered durable: the one for this outcome.
            payload = result.durable
          } else {
            const b = build(write, outcome, plan)
            payload = b.payload
            extras = b.extras
            try {
              seq = await persist(b.payload, write.tenantId, nowSeconds(clock))
            } catch (err) {
              // A failure may come after Postgres committed (the COMMIT's reply lost with its
              // connection). Stored: the decision stands, and is answered. Known not stored: no
              // receipt, no decision, so the quota unit and the grant are given back. Unknown
              // (Postgres still away): kept, failing closed: a grant given back whose use was in
              // fact committed could pay for a second write.
              const stored = await storedSeq(b.payload, write.tenantId)
              if (stored === null) throw err
              if (stored === 'absent') {
                await gate.release(req, result).catch(() => {})
                throw err
              }
              seq = stored
            }
          }
          return {
            kind: 'decided',
            decision: outcome.decision,
            outcome,
            plan,
            context: result.context,
            receiptId: payload.receipts[0]?.receiptId as string,
            seq,
            actionId: payload.actions[0]?.actionId ?? null,
            extras,
          }
        }
      }
    },
  }
  return writes
}
