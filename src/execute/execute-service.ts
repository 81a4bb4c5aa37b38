import type { AuditLog } from '../audit/audit-log.js'
import { openAllowToken } from '../core/allow-token.js'
import type { Clock } from '../core/clock.js'
import { nowSeconds } from '../core/clock.js'
import type { SystemRecord } from '../core/enrolled-system.js'
import { ERRORS, fail, WriteGateError } from '../core/errors.js'
import { newId } from '../core/ids.js'
import { canonicalJson } from '../core/jcs.js'
import { rawRequestBinding, requestBinding } from '../core/lease-binding.js'
import type { ExecuteReason } from '../core/reasons.js'
import { draft, type Receipt, type ReceiptDraft } from '../core/receipt.js'
import { digestsEqual, sha256Hex } from '../core/secret-hash.js'
import type { Gate, StandingResult } from '../gate/gate.js'
import type { KeyCaller } from '../identity/caller.js'
import type { Logger } from '../observability/logger.js'
import type { Keyring } from '../security/keyring.js'
import type { Lease, Stores, SystemOfRecord } from '../store/ports/index.js'
import type { CredentialResolver, Injection } from '../systems/credential-resolver.js'
import { bodyCarriesMethodOverride } from '../systems/method-override-query.js'
import type { SystemsRegistry } from '../systems/systems-registry.js'
import { isTimeout, type UpstreamClient, type UpstreamOutcome, withholds } from './upstream-client.js'
import { checkUpstreamPath, EXECUTE_PATH_PREFIX, failUnsafePath } from './upstream-url.js'

/** The most an execute's `body` may weigh, measured as its JCS bytes (what is bound and sent). */
export const EXECUTE_BODY_MAX_BYTES = 1024 * 1024

/** Methods an upstream request may use, exactly as written here. */
export const UPSTREAM_METHODS = ['GET', 'HEAD', 'OPTIONS', 'POST', 'PUT', 'PATCH', 'DELETE'] as const

/** Why an execute failed closed (contract §7): the reasons registry's execute part. */
export type FailClosedReason = ExecuteReason

export interface ExecuteInput {
  systemId: string
  method: string
  path: string
  body?: Record<string, unknown> | undefined
  idempotencyKey?: string | undefined
  leaseId?: string | undefined
  token?: string | undefined
  /**
   * Never from HTTP: the approval of a write the proxy staged replays its exact bytes (bound
   * with rawRequestBinding), on the system's own path, which need not begin with /v1/.
   */
  replay?: { bytes: Buffer; contentType: string | null; headers?: Record<string, string> } | undefined
}

export type UpstreamResponse = Extract<UpstreamOutcome, { kind: 'response' }>

export type ExecuteResult =
  | { kind: 'refused'; reason: FailClosedReason; receipt: Receipt }
  /** The upstream answered with a status below 500: its answer, verbatim. */
  | ({ kind: 'completed'; upstream: UpstreamResponse } & Authorized)
  /** A 5xx, a timeout, a refused connection or an oversized response: the write's fate is unknown. */
  | ({ kind: 'upstream_error'; upstream: UpstreamOutcome } & Authorized)

interface Authorized {
  /** The EXECUTE receipt (decision ALLOW) made durable before the upstream was called. */
  authorized: Receipt
  /** The receipts the claim appended in the same transaction. */
  claimed: Receipt[]
  /** The EXECUTE receipt of the upstream's outcome; null if it could not be written. */
  outcome: Receipt | null
}

export interface ExecuteExtras {
  /**
   * Runs inside the authorising transaction once the lease is consumed; its receipts are
   * appended just before the EXECUTE receipt. Throwing aborts it all: the lease stays
   * unused and the upstream is not called (a WriteGateError reaches the caller as-is).
   */
  claim?: (stores: Stores) => Promise<ReceiptDraft[]>
  /** Added to the detail of every EXECUTE receipt of this call (an action id, say). */
  detail?: Record<string, unknown>
  /**
   * The system's version the caller checked (an approval: the one its action was staged
   * under). The write goes to the record read here; another version is refused, 409
   * action_system_changed, before anything is authorised.
   */
  systemVersion?: number
}

export interface ExecuteService {
  execute(caller: KeyCaller, input: ExecuteInput, extras?: ExecuteExtras): Promise<ExecuteResult>
}

/** A request that is well formed and may be sent: method, checked path, exact body bytes and their binding. */
interface Prepared {
  system: SystemRecord
  method: string
  path: string
  bytes: string | Buffer | null
  contentType: string | null
  bodySha256: string | null
  binding: string
  headers?: Record<string, string> | undefined
}

/**
 * POST /v1/execute and the write of an approved action. In order:
 * 1. refuse malformed input with 400/413 (no receipt: nothing was asked of the gate);
 * 2. find the lease (or create it from an ALLOW token's binding) and match it byte for byte;
 * 3. judge the standing of the lease's key and the caller's key under the current snapshot;
 * 4. consume the lease and make the authorising EXECUTE receipt durable in one transaction;
 * 5. only then call the upstream, and record its outcome in a second EXECUTE receipt (also ALLOW,
 *    `detail.phase: 'completed'`).
 * Every refusal in 2-4 is an EXECUTE receipt with decision DENY and no upstream request.
 */
export function createExecuteService(deps: {
  sor: SystemOfRecord
  audit: AuditLog
  gate: Gate
  clock: Clock
  keyring: Keyring
  systems: SystemsRegistry
  upstream: UpstreamClient
  credentials: CredentialResolver
  logger: Logger
}): ExecuteService {
  const { sor, audit, gate, clock, keyring, systems, upstream, logger } = deps

  async function prepare(caller: KeyCaller, input: ExecuteInput, extras: ExecuteExtras): Promise<Prepared> {
    const system = await systems.system(caller.tenantId, input.systemId)
    if (!system) fail(ERRORS.unknownSystem, { systemId: input.systemId })
    if (extras.systemVersion !== undefined && system.version !== extras.systemVersion)
      fail(ERRORS.actionSystemChanged, {
        ...(extras.detail ?? {}),
        systemId: system.systemId,
        systemVersion: system.version,
      })
    if (!input.replay && !input.path.startsWith(EXECUTE_PATH_PREFIX))
      fail(
        ERRORS.invalidRequest,
        { issues: [{ path: 'path', message: 'must begin with /v1/' }] },
        { message: 'invalid body: path: must begin with /v1/' },
      )
    // '/': a path sent over HTTP was just checked for /v1/; a replay is on the system's own path.
    const verdict = checkUpstreamPath(input.path, '/')
    if (!verdict.ok) failUnsafePath(verdict.problem)
    if (bodyCarriesMethodOverride(input.body)) fail(ERRORS.methodOverride)
    if ((input.leaseId === undefined) === (input.token === undefined))
      fail(
        ERRORS.invalidRequest,
        { issues: [{ path: 'leaseId', message: 'send exactly one of leaseId or token' }] },
        { message: 'invalid body: send exactly one of leaseId or token' },
      )
    if (input.replay) {
      const { bytes, contentType } = input.replay
      return {
        system,
        method: input.method,
        path: input.path,
        bytes: bytes.length > 0 ? bytes : null,
        contentType,
        headers: input.replay.headers,
        bodySha256: sha256Hex(bytes),
        binding: rawRequestBinding(input.method, input.path, bytes),
      }
    }
    let bodyText: string | null = null
    if (input.body !== undefined) {
      // JCS cannot fail here: the JSON parser refuses non-finite numbers and deep nesting
      // (core/storable-json.ts), and an approval's body was already bound before it came.
      bodyText = canonicalJson(input.body)
      if (Buffer.byteLength(bodyText) > EXECUTE_BODY_MAX_BYTES)
        fail(ERRORS.payloadTooLarge, { limit: EXECUTE_BODY_MAX_BYTES, field: 'body' })
    }
    return {
      system,
      method: input.method,
      path: input.path,
      bytes: bodyText,
      contentType: bodyText === null ? null : 'application/json',
      bodySha256: bodyText === null ? null : sha256Hex(bodyText),
      binding: requestBinding(input.method, input.path, input.body),
    }
  }

  return {
    async execute(caller, input, extras = {}) {
      const req = await prepare(caller, input, extras)
      const at = nowSeconds(clock)
      const via = input.token !== undefined ? 'token' : 'lease'
      const requestDetail = {
        systemId: req.system.systemId,
        method: req.method,
        path: req.path,
        bodySha256: req.bodySha256,
        idempotencyKey: input.idempotencyKey ?? null,
        via,
        ...(extras.detail ?? {}),
      }
      const receiptBase = (lease: Lease | null) => ({
        tenantId: caller.tenantId,
        kind: 'EXECUTE' as const,
        createdAt: at,
        verb: lease?.verb ?? null,
        target: lease?.target ?? null,
        principalId: caller.principalId,
        principalName: caller.principalName,
        keyId: caller.keyId,
      })

      async function refuse(
        reason: FailClosedReason,
        lease: Lease | null,
        more: Record<string, unknown> = {},
        policyVersion: number | null = null,
      ): Promise<ExecuteResult> {
        const d = draft({
          ...receiptBase(lease),
          receiptId: newId('receipt'),
          decision: 'DENY',
          reason,
          policyVersion,
          detail: {
            phase: 'refused',
            ...requestDetail,
            leaseId: lease?.leaseId ?? input.leaseId ?? null,
            lease: lease ? { keyId: lease.keyId, principalId: lease.principalId } : null,
            upstreamCalled: false,
            ...more,
          },
        })
        let receipt: Receipt | undefined
        try {
          ;[receipt] = await audit.append([d])
        } catch (err) {
          // No receipt, no answer on record: say so, and still never call the upstream.
          logger.error(
            { err, tenantId: caller.tenantId },
            'execute: the refusal receipt could not be written',
          )
        }
        if (!receipt) fail(ERRORS.gateUnavailable, { ok: false, reason: 'gate_error', upstreamCalled: false })
        return { kind: 'refused', reason, receipt }
      }

      // 2. The lease: by id, or created from the token's binding (the token's id is the lease id).
      let lease: Lease | null
      try {
        if (input.token !== undefined) {
          const opened = openAllowToken(keyring.tokenSigning, input.token)
          if (!opened.ok) return await refuse('token_invalid', null, { tokenReason: opened.reason })
          const c = opened.claims
          const tokenId = { tokenId: c.jti }
          if (c.tid !== caller.tenantId)
            return await refuse('token_invalid', null, { tokenReason: 'wrong_tenant', ...tokenId })
          if (c.exp <= at) return await refuse('token_invalid', null, { tokenReason: 'expired', ...tokenId })
          if (!c.bind) return await refuse('token_invalid', null, { tokenReason: 'unbound', ...tokenId })
          await sor.stores.leases.insertIfAbsent({
            leaseId: c.jti,
            tenantId: c.tid,
            keyId: c.kid,
            principalId: c.pid,
            verb: c.verb,
            target: c.tgt,
            systemId: c.bind.sys,
            binding: c.bind.h,
            createdAt: c.iat,
            expiresAt: c.exp,
          })
          lease = await sor.stores.leases.get(caller.tenantId, c.jti)
        } else {
          lease = await sor.stores.leases.get(caller.tenantId, input.leaseId as string)
        }
      } catch (err) {
        logger.warn({ err, tenantId: caller.tenantId }, 'execute: lease lookup failed')
        return refuse('gate_error', null)
      }
      if (!lease) return refuse('lease_unknown', null)
      if (lease.usedAt !== null) return refuse('lease_used', lease)
      if (lease.expiresAt <= at) return refuse('lease_expired', lease)
      if (lease.systemId !== req.system.systemId || !digestsEqual(lease.binding, req.binding))
        return refuse('lease_mismatch', lease)
      // The method needs no check of its own: every lease and token is bound to one of
      // UPSTREAM_METHODS (/v1/check, tool definitions and staged replays all refuse others),
      // and the binding covers the method byte for byte, so any other is a lease_mismatch above.

      // 3. Standing, linearizable with the kill switch: the lease's key and the caller's key.
      // The lease's is judged as of its issue: a revocation since bars it even if lifted again.
      const keyIds = [...new Set([lease.keyId, caller.keyId])]
      let standings: StandingResult[]
      try {
        standings = await Promise.all(
          keyIds.map((k) =>
            gate.standing(caller.tenantId, k, k === lease.keyId ? lease.createdAt : undefined),
          ),
        )
      } catch {
        standings = [{ kind: 'unavailable', reason: 'store_unreachable' }]
      }
      const unavailable = standings.find((s) => s.kind === 'unavailable')
      if (unavailable) return refuse('gate_error', lease, { gate: unavailable.reason })
      const barredAt = standings.findIndex((s) => s.kind === 'barred')
      const barred = standings[barredAt]
      if (barred?.kind === 'barred')
        return refuse(
          'revoked',
          lease,
          { barred: { keyId: keyIds[barredAt], reason: barred.reason } },
          barred.policyVersion,
        )
      const policyVersion = Math.max(
        ...standings.map((s) => (s.kind === 'in_good_standing' ? s.policyVersion : 0)),
      )

      // The credential this process injects: without it nothing is sent, and the lease stays unused.
      let credential: Injection | null = null
      if (req.system.credential) {
        const resolved = deps.credentials.resolve(caller.tenantId, req.system.credential, req.system)
        if (!resolved.ok) {
          logger.warn(
            { tenantId: caller.tenantId, systemId: req.system.systemId, problem: resolved.problem },
            'execute: the system credential is unavailable',
          )
          return refuse('credential_unavailable', lease, { problem: resolved.problem }, policyVersion)
        }
        credential = { header: resolved.header, value: resolved.value, secret: resolved.secret }
      }

      // 4. Consume and record, together: no write without a durable receipt.
      const authorizedDraft = draft({
        ...receiptBase(lease),
        receiptId: newId('receipt'),
        decision: 'ALLOW',
        policyVersion,
        detail: {
          phase: 'authorized',
          ...requestDetail,
          leaseId: lease.leaseId,
          lease: { keyId: lease.keyId, principalId: lease.principalId },
        },
      })
      const leaseId = lease.leaseId
      let committed: { authorized: Receipt; claimed: Receipt[] } | null
      try {
        committed = await sor.transaction(async (stores) => {
          // The system as prepared must still be enrolled when the write is authorised: prepare()
          // read it before the standing check and this transaction, and a DELETE answered in
          // between let approved writes reach the deleted system's upstream, their receipts after
          // SYSTEM_DELETE (found in review). A change that lands after this read is in flight
          // with the write, as a revoke is.
          const enrolled = await stores.systems.get(caller.tenantId, req.system.systemId)
          if (!enrolled || enrolled.deletedAt !== null)
            fail(ERRORS.unknownSystem, { systemId: req.system.systemId })
          // Changed (another upstream, another credential): what was read is not what is enrolled.
          if (extras.systemVersion !== undefined && enrolled.version !== extras.systemVersion)
            fail(ERRORS.actionSystemChanged, {
              ...(extras.detail ?? {}),
              systemId: enrolled.systemId,
              systemVersion: enrolled.version,
            })
          if (enrolled.version !== req.system.version)
            fail(ERRORS.systemChanged, { systemId: enrolled.systemId, systemVersion: enrolled.version })
          if (!(await stores.leases.consume(caller.tenantId, leaseId, at))) return null
          const before = extras.claim ? await extras.claim(stores) : []
          const receipts = await audit.appendWith(stores, [...before, authorizedDraft])
          const authorized = receipts.find((r) => r.receiptId === authorizedDraft.receiptId)
          if (!authorized) throw new Error('the authorising receipt was not appended')
          return { authorized, claimed: receipts.filter((r) => r !== authorized) }
        })
      } catch (err) {
        // A claim's own refusal (the action was approved concurrently, say) is the caller's answer.
        if (err instanceof WriteGateError) throw err
        logger.warn(
          { err, tenantId: caller.tenantId },
          'execute: the authorising receipt could not be written',
        )
        return refuse('gate_error', lease)
      }
      if (!committed) return refuse('lease_used', lease)
      const { authorized, claimed } = committed

      // 5. The write itself, then its outcome on record.
      const sent = await upstream.send(req.system, credential, {
        method: req.method,
        path: req.path,
        body: req.bytes,
        contentType: req.contentType,
        idempotencyKey: input.idempotencyKey ?? null,
        receiptId: authorized.receiptId,
        headers: req.headers,
      })
      const failed = sent.kind === 'failed' || sent.status >= 500
      const withheld = sent.kind === 'failed' ? sent.failure : sent.incomplete
      if (withholds(withheld))
        logger.warn(
          { tenantId: caller.tenantId, systemId: req.system.systemId, reason: withheld },
          withheld === 'credential_echoed'
            ? "execute: the upstream's answer carried back the injected credential; it is not relayed"
            : "execute: the upstream's answer came compressed, so it could not be searched for the injected credential; it is not relayed",
        )
      if (failed)
        logger.warn(
          {
            tenantId: caller.tenantId,
            systemId: req.system.systemId,
            status: sent.status,
            failure: sent.kind === 'failed' ? sent.failure : 'upstream_5xx',
            latencyMs: sent.latencyMs,
          },
          'execute: upstream error',
        )
      const outcomeDraft = draft({
        ...receiptBase(lease),
        receiptId: newId('receipt'),
        createdAt: nowSeconds(clock),
        // Contract §5: an EXECUTE receipt carries a decision. The outcome's is the one the call
        // was made under, so `decision = 'ALLOW'` finds every write that went out with its result.
        decision: 'ALLOW',
        policyVersion,
        detail: {
          phase: 'completed',
          authorizedReceiptId: authorized.receiptId,
          systemId: req.system.systemId,
          leaseId,
          ...(extras.detail ?? {}),
          ...outcomeDetail(sent),
        },
      })
      let outcome: Receipt | null = null
      try {
        ;[outcome = null] = await audit.append([outcomeDraft])
      } catch (err) {
        // The write happened and its authorisation is on record; hiding its answer would be worse.
        logger.error(
          { err, tenantId: caller.tenantId, authorizedReceiptId: authorized.receiptId },
          'execute: the outcome receipt could not be written',
        )
      }
      if (failed) return { kind: 'upstream_error', authorized, claimed, outcome, upstream: sent }
      return { kind: 'completed', authorized, claimed, outcome, upstream: sent as UpstreamResponse }
    },
  }
}

/** What the outcome receipt says about the upstream's answer (never the body itself). */
function outcomeDetail(sent: UpstreamOutcome): Record<string, unknown> {
  if (sent.kind === 'failed')
    return {
      outcome: 'upstream_error',
      failure: sent.failure,
      timeout: isTimeout(sent.failure),
      status: sent.status,
      upstreamCalled: sent.sent,
      latencyMs: sent.latencyMs,
    }
  return {
    outcome: sent.status >= 500 ? 'upstream_error' : 'response',
    ...(sent.status >= 500 ? { failure: 'upstream_5xx', timeout: false } : {}),
    status: sent.status,
    upstreamCalled: true,
    latencyMs: sent.latencyMs,
    ...(sent.incomplete
      ? { responseIncomplete: sent.incomplete }
      : { responseBytes: sent.body.length, responseSha256: sha256Hex(sent.body) }),
    contentType: sent.contentType,
    ...(sent.location !== null ? { location: sent.location } : {}),
  }
}
