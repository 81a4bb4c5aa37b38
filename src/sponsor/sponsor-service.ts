import type { AuditLog } from '../audit/audit-log.js'
import type { Clock } from '../core/clock.js'
import { nowSeconds } from '../core/clock.js'
import { ERRORS, fail } from '../core/errors.js'
import { newId } from '../core/ids.js'
import { draft, type ReceiptKind } from '../core/receipt.js'
import { ENVIRONMENTS, isEnvironment, SANDBOX_VERB, Vocabulary } from '../core/verbs.js'
import type { StateChanges } from '../gate/state-change.js'
import type { SponsorCaller } from '../identity/caller.js'
import type { RosterTarget, Stores, SystemOfRecord } from '../store/ports/index.js'

export const GRANT_DEFAULT_TTL = 900
export const GRANT_MAX_TTL = 86400

export interface GrantInput {
  verb: string
  target?: string | undefined
  principalId?: string | undefined
  environment?: string | undefined
  ttlSeconds?: number | undefined
  reason?: string | undefined
}

export interface GrantView {
  grantId: string
  verb: string
  target: string | null
  principalId: string | null
  environment: string | null
  expiresAt: number
}

export type RosterTargetBody = {
  principalId?: string | undefined
  keyId?: string | undefined
  all?: boolean | undefined
  reason?: string | undefined
}
export type TargetView = { principalId: string } | { keyId: string } | { all: true }

export interface SponsorService {
  grant(caller: SponsorCaller, input: GrantInput): Promise<GrantView>
  revoke(caller: SponsorCaller, body: RosterTargetBody): Promise<{ revoked: TargetView; receiptId: string }>
  reinstate(
    caller: SponsorCaller,
    body: RosterTargetBody,
  ): Promise<{ reinstated: TargetView; receiptId: string }>
  revoked(
    caller: SponsorCaller,
  ): Promise<{ tenantId: string; revoked: (TargetView & { reason: string | null; revokedAt: number })[] }>
}

function targetOf(body: RosterTargetBody): RosterTarget {
  const named = [body.principalId !== undefined, body.keyId !== undefined, body.all !== undefined].filter(
    Boolean,
  ).length
  if (named !== 1 || body.all === false) {
    fail(
      ERRORS.invalidRequest,
      { issues: [{ path: '', message: 'name exactly one of principalId, keyId or all: true' }] },
      { message: 'invalid body: name exactly one of principalId, keyId or all: true' },
    )
  }
  if (body.all) return { kind: 'all' }
  if (body.principalId !== undefined) return { kind: 'principal', id: body.principalId }
  return { kind: 'key', id: body.keyId as string }
}

function viewOf(t: RosterTarget): TargetView {
  return t.kind === 'all' ? { all: true } : t.kind === 'principal' ? { principalId: t.id } : { keyId: t.id }
}

/**
 * The sponsor's endpoints (S only): grants, the kill switch and its undo. None of them is
 * quota-gated, and each change is published before it is acknowledged.
 */
export function createSponsorService(deps: {
  sor: SystemOfRecord
  audit: AuditLog
  clock: Clock
  /** Every change: the version bump, the change and its receipt in one transaction, then the snapshot published. */
  changes: StateChanges
}): SponsorService {
  const { sor, audit, clock, changes } = deps

  async function checkTarget(
    stores: Stores,
    tenantId: string,
    t: RosterTarget,
  ): Promise<{ principalId: string | null; principalName: string | null; keyId: string | null }> {
    if (t.kind === 'principal') {
      const p = await stores.principals.get(tenantId, t.id)
      if (!p) fail(ERRORS.principalNotFound)
      return { principalId: p.id, principalName: p.name, keyId: null }
    }
    if (t.kind === 'key') {
      const k = await stores.keys.get(tenantId, t.id)
      if (!k) fail(ERRORS.keyNotFound)
      const p = await stores.principals.get(tenantId, k.principalId)
      return { principalId: k.principalId, principalName: p?.name ?? null, keyId: k.id }
    }
    return { principalId: null, principalName: null, keyId: null }
  }

  async function rosterChange(
    caller: SponsorCaller,
    body: RosterTargetBody,
    kind: Extract<ReceiptKind, 'REVOKE' | 'REINSTATE'>,
  ) {
    const target = targetOf(body)
    const reason = body.reason ?? null
    const receiptId = newId('receipt')
    await changes.apply(caller.tenantId, async (stores, stateVersion) => {
      const at = nowSeconds(clock)
      const subject = await checkTarget(stores, caller.tenantId, target)
      if (kind === 'REVOKE') await stores.roster.add(caller.tenantId, target, reason, at)
      else if (!(await stores.roster.remove(caller.tenantId, target, at)))
        fail(ERRORS.notRevoked, { target: viewOf(target) })
      await audit.appendWith(stores, [
        draft({
          receiptId,
          tenantId: caller.tenantId,
          kind,
          decision: kind === 'REVOKE' ? 'REVOKE' : null,
          createdAt: at,
          ...subject,
          reason,
          policyVersion: stateVersion,
          detail: { actor: { type: 'sponsor' }, target: viewOf(target) },
        }),
      ])
    })
    return { target: viewOf(target), receiptId }
  }

  return {
    async grant(caller, input) {
      const ttl = input.ttlSeconds ?? GRANT_DEFAULT_TTL
      if (!Number.isInteger(ttl) || ttl < 1 || ttl > GRANT_MAX_TTL) {
        fail(
          ERRORS.invalidRequest,
          { issues: [{ path: 'ttlSeconds', message: `an integer from 1 to ${GRANT_MAX_TTL}` }] },
          { message: `invalid body: ttlSeconds: an integer from 1 to ${GRANT_MAX_TTL}` },
        )
      }
      const environment = input.environment ?? null
      if (environment !== null && !isEnvironment(environment))
        fail(ERRORS.unknownEnvironment, { environment, environments: [...ENVIRONMENTS] })
      const grantId = newId('grant')
      return changes.apply(caller.tenantId, async (stores, stateVersion) => {
        const at = nowSeconds(clock)
        const resolved =
          input.verb.toLowerCase() === SANDBOX_VERB
            ? null
            : new Vocabulary(await stores.verbs.list(caller.tenantId)).resolve(input.verb)
        if (!resolved) fail(ERRORS.unknownVerb, { verbs: [input.verb] })
        let principalName: string | null = null
        if (input.principalId !== undefined) {
          const p = await stores.principals.get(caller.tenantId, input.principalId)
          if (!p || p.deletedAt !== null) fail(ERRORS.principalNotFound)
          principalName = p.name
        }
        const g = {
          grantId,
          tenantId: caller.tenantId,
          verb: resolved.canonical,
          target: input.target ?? null,
          principalId: input.principalId ?? null,
          environment,
          reason: input.reason ?? null,
          createdAt: at,
          expiresAt: at + ttl,
        }
        await stores.grants.insert(g)
        await audit.appendWith(stores, [
          draft({
            receiptId: newId('receipt'),
            tenantId: caller.tenantId,
            kind: 'GRANT',
            createdAt: at,
            verb: g.verb,
            requestedVerb: input.verb,
            target: g.target,
            environment,
            principalId: g.principalId,
            principalName,
            reason: g.reason,
            policyVersion: stateVersion,
            detail: { actor: { type: 'sponsor' }, grantId, expiresAt: g.expiresAt },
          }),
        ])
        return {
          grantId,
          verb: g.verb,
          target: g.target,
          principalId: g.principalId,
          environment,
          expiresAt: g.expiresAt,
        }
      })
    },

    async revoke(caller, body) {
      const r = await rosterChange(caller, body, 'REVOKE')
      return { revoked: r.target, receiptId: r.receiptId }
    },

    async reinstate(caller, body) {
      const r = await rosterChange(caller, body, 'REINSTATE')
      return { reinstated: r.target, receiptId: r.receiptId }
    },

    async revoked(caller) {
      const entries = await sor.stores.roster.list(caller.tenantId)
      return {
        tenantId: caller.tenantId,
        revoked: entries.map((e) => ({ ...viewOf(e.target), reason: e.reason, revokedAt: e.revokedAt })),
      }
    },
  }
}
