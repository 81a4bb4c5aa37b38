import type { KeyObject } from 'node:crypto'
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { ApprovalService } from '../../actions/approval-service.js'
import type { Checkpointer } from '../../audit/checkpointer.js'
import type { ReceiptWakeups } from '../../audit/receipt-wakeups.js'
import type { StreamSlots } from '../../audit/stream-slots.js'
import { readClientJson } from '../../control/http/json-body.js'
import type { Clock } from '../../core/clock.js'
import { ERRORS, fail, WriteGateError } from '../../core/errors.js'
import type { Authenticator } from '../../identity/authenticator.js'
import type { PrincipalService } from '../../identity/principal-service.js'
import type { PolicyService } from '../../policy/policy-service.js'
import type { SponsorService } from '../../sponsor/sponsor-service.js'
import type { CheckpointStore } from '../../store/ports/checkpoints.js'
import type { SystemOfRecord } from '../../store/ports/index.js'
import type { ReceiptReader } from '../../store/ports/receipt-reader.js'
import type { Notice } from '../layout.js'
import { checkCsrf, formOf, sessionOf } from '../portal-http.js'
import type { PortalSession, PortalSessions } from '../portal-sessions.js'

/** What the portal's pages need: the control plane's services, never their adapters' internals. */
export interface PortalDeps {
  sessions: PortalSessions
  auth: Authenticator
  sor: SystemOfRecord
  approvals: ApprovalService
  sponsor: SponsorService
  policies: PolicyService
  principals: PrincipalService
  reader: ReceiptReader
  checkpoints: CheckpointStore
  checkpointer: Checkpointer
  wakeups: ReceiptWakeups
  publicKey: KeyObject
  clock: Clock
  streamKeepaliveMs: number
  /** Open receipt streams, API and portal together (stream-slots.ts). */
  streamSlots: StreamSlots
  sessionMaxSeconds: number
}

/** A page for a signed-in human; without a session, the browser goes to sign-in. */
export async function requirePage(req: FastifyRequest, reply: FastifyReply): Promise<void> {
  if (!req.portal) await reply.redirect('/portal/sign-in', 303)
}

/** A state change: a live session, and a form of one of its pages. */
export function signedForm(req: FastifyRequest): { session: PortalSession; form: Record<string, string> } {
  const session = sessionOf(req)
  const form = formOf(req)
  checkCsrf(req, session, form)
  return { session, form }
}

/**
 * A JSON field of a form (a policy, parameter edits), read as the API reads a JSON body: what
 * storage cannot hold (NUL, nesting past 64 levels, `1e400`, `__proto__`) is refused with a 400,
 * never left to fail deeper as a 500.
 */
export function portalJson(text: string, what: string): unknown {
  const read = readClientJson(text)
  if (read.ok) return read.value
  fail(ERRORS.invalidRequest, undefined, {
    message: read.problem === null ? `${what} is not valid JSON` : `${what}: ${read.problem}`,
  })
}

/** The registry's words for a refused change, shown on the page it came from. */
export function refusal(err: unknown): { notice: Notice; status: number } {
  if (!(err instanceof WriteGateError)) throw err
  const issues = (err.detail?.issues as { path?: string; message?: string }[] | undefined) ?? []
  const extra = issues.map((i) => `${i.path ? `${i.path}: ` : ''}${i.message ?? ''}`).join('; ')
  const verbs = Array.isArray(err.detail?.verbs) ? ` (${(err.detail.verbs as string[]).join(', ')})` : ''
  return {
    notice: { kind: 'error', text: `${err.message}${extra ? `: ${extra}` : ''}${verbs} [${err.def.code}]` },
    status: err.def.status,
  }
}
