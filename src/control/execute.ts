import type { FastifyReply } from 'fastify'
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod'
import { z } from 'zod'
import { ERRORS } from '../core/errors.js'
import { EXECUTE_REASONS, type ExecuteReason } from '../core/reasons.js'
import {
  EXECUTE_BODY_MAX_BYTES,
  type ExecuteResult,
  type ExecuteService,
} from '../execute/execute-service.js'
import { isTimeout } from '../execute/upstream-client.js'
import type { Authenticator } from '../identity/authenticator.js'
import { keyCaller, requireKey } from './http/auth.js'

/**
 * The request may carry a `body` of up to 1 MiB (measured as JCS bytes by the service) plus
 * its envelope, so this route accepts a little more than the global 1 MiB limit.
 */
export const EXECUTE_ROUTE_BODY_LIMIT = EXECUTE_BODY_MAX_BYTES + 64 * 1024

/** Visible ASCII, no leading or trailing space: it becomes a header, so no CR, LF or control byte. */
const IDEMPOTENCY_KEY = /^[\x21-\x7e](?:[\x20-\x7e]{0,253}[\x21-\x7e])?$/

const executeBody = z
  .object({
    systemId: z.string().min(1).max(128).describe('An enrolled system of the caller’s tenant'),
    method: z
      .string()
      .regex(/^[A-Za-z]{1,16}$/)
      .describe('Must equal the lease’s method byte for byte (POST is not post)'),
    path: z
      .string()
      .min(1)
      .max(4096)
      .describe('Must begin with /v1/ and equal the lease’s path byte for byte'),
    leaseId: z.string().min(1).max(128).optional(),
    token: z.string().min(1).max(8192).optional().describe('An ALLOW token bound to this request'),
    body: z
      .record(z.string(), z.unknown())
      .optional()
      .describe('JSON object, at most 1 MiB as canonical (JCS) bytes: those bytes are sent'),
    idempotencyKey: z.string().regex(IDEMPOTENCY_KEY).optional().describe('Sent upstream as Idempotency-Key'),
  })
  .strict()

const failClosed = z
  .object({
    ok: z.literal(false),
    // Every reason the service can give (the registry): one missing here failed the answer's
    // serialisation, a 500 instead of the receipt's reason (credential_unavailable was).
    reason: z.enum(Object.keys(EXECUTE_REASONS) as [ExecuteReason, ...ExecuteReason[]]),
    upstreamCalled: z.literal(false),
    receiptId: z.string(),
  })
  .describe(
    'Failed closed: no upstream request was made; the EXECUTE receipt (decision DENY) says why. On success the 200 body is instead the upstream body verbatim, with its content-type.',
  )

const upstreamFailure = z.object({
  error: z.string(),
  code: z.literal(ERRORS.upstreamError.code),
  ok: z.literal(false),
  reason: z.literal('upstream_error'),
  upstreamCalled: z.boolean(),
  status: z.number().int().nullable(),
  failure: z.string(),
  timeout: z.boolean(),
  receiptId: z.string(),
  outcomeReceiptId: z.string().nullable(),
})

/** Shapes an execute's result as the HTTP answer (shared by nothing else: approvals have their own). */
function send(reply: FastifyReply, result: ExecuteResult) {
  if (result.kind === 'refused') {
    return reply.code(200).send({
      ok: false as const,
      reason: result.reason,
      upstreamCalled: false as const,
      receiptId: result.receipt.receiptId,
    })
  }
  reply.header('x-writegate-receipt', result.authorized.receiptId)
  if (result.kind === 'upstream_error') {
    const u = result.upstream
    // Not our error: the service logged a warning; the body tells the caller what happened.
    return reply.code(502).send({
      error: ERRORS.upstreamError.message,
      code: ERRORS.upstreamError.code,
      ok: false as const,
      reason: 'upstream_error' as const,
      upstreamCalled: u.kind === 'failed' ? u.sent : true,
      status: u.status,
      failure: u.kind === 'failed' ? u.failure : 'upstream_5xx',
      timeout: u.kind === 'failed' && isTimeout(u.failure),
      receiptId: result.authorized.receiptId,
      outcomeReceiptId: result.outcome?.receiptId ?? null,
    })
  }
  const u = result.upstream
  reply.header('x-writegate-upstream-status', String(u.status))
  // The upstream answered but its body could not be read whole: none is relayed, and this says why.
  if (u.incomplete) reply.header('x-writegate-upstream-incomplete', u.incomplete)
  if (u.location !== null) reply.header('x-writegate-upstream-location', u.location)
  // The body is the upstream's, served from our origin: never let a browser sniff it into HTML.
  reply.header('x-content-type-options', 'nosniff')
  reply.header('content-type', u.contentType ?? 'application/octet-stream')
  return reply.code(200).send(u.body)
}

export function executeRoutes(deps: { execute: ExecuteService; auth: Authenticator }): FastifyPluginAsyncZod {
  return async (app) => {
    app.post(
      '/v1/execute',
      {
        bodyLimit: EXECUTE_ROUTE_BODY_LIMIT,
        schema: {
          summary: 'Run one upstream request that byte-matches a lease or ALLOW token',
          description:
            'The request goes to the enrolled system’s fixed origin with its injected credential. Success: 200 with the upstream body verbatim (x-writegate-receipt names the EXECUTE receipt, x-writegate-upstream-status the upstream status; a body that outgrew execute.maxResponseBytes or stalled, or an answer that carried back the injected credential or came compressed, is not relayed, and x-writegate-upstream-incomplete says why). Fail closed: 200 {ok:false, reason, upstreamCalled:false, receiptId}. Upstream 5xx or timeout: 502. See docs/execute.md.',
          body: executeBody,
          response: { 200: failClosed, 502: upstreamFailure },
        },
        onRequest: requireKey(deps.auth, { scope: 'agent' }),
      },
      async (req, reply) => send(reply, await deps.execute.execute(keyCaller(req), req.body)),
    )
  }
}
