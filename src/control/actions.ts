import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod'
import { z } from 'zod'
import type { ApprovalService } from '../actions/approval-service.js'
import { ERRORS } from '../core/errors.js'
import type { Authenticator } from '../identity/authenticator.js'
import type { ActionPosition } from '../store/ports/index.js'
import { keyCaller, requireKey } from './http/auth.js'

const action = z.object({
  actionId: z.string(),
  systemId: z.string(),
  tool: z.string(),
  verb: z.string(),
  target: z.string().nullable(),
  environment: z.string().nullable(),
  params: z.record(z.string(), z.unknown()),
  principalId: z.string(),
  keyId: z.string(),
  stagedReceiptId: z.string(),
  revertOf: z.string().nullable().describe('The action whose write this one undoes'),
  createdAt: z.number().int(),
  expiresAt: z.number().int(),
  request: z
    .object({
      method: z.string(),
      path: z.string(),
      contentType: z.string().nullable(),
      contentEncoding: z.string().nullable().describe("The body's Content-Encoding as sent; null for none"),
      bodyEncoding: z.enum(['json', 'text', 'binary', 'none']),
      body: z.unknown(),
      bodyBytes: z.number().int(),
    })
    .nullable()
    .describe(
      'For a request the proxy staged: the request readably, its body parsed (json), as text, or not shown (binary). Null for a tool call.',
    ),
})

const receipt = z
  .object({
    receiptId: z.string(),
    seq: z.number().int(),
    kind: z.string(),
    decision: z.string().nullable(),
    createdAt: z.number().int(),
    hash: z.string(),
    executeReceiptId: z.string().nullable(),
    outcomeReceiptId: z.string().nullable(),
  })
  .describe('ACTION_APPROVED when the write went out; the refusing EXECUTE receipt when it did not')

const result = z
  .object({
    ok: z.boolean(),
    upstreamCalled: z.boolean(),
    reason: z.string().optional(),
    status: z.number().int().nullable().optional(),
    contentType: z.string().nullable().optional(),
    body: z.unknown().optional(),
    failure: z.string().optional(),
    timeout: z.boolean().optional(),
    latencyMs: z.number().int().optional(),
    responseIncomplete: z
      .string()
      .optional()
      .describe(
        'executed, but the answer body could not be read whole (response_too_large, body_timeout, deadline_exceeded), or it carried back the injected credential (credential_echoed) or came compressed so it could not be searched for it (answer_compressed): none is given',
      ),
  })
  .describe('executed: status, contentType, body; denied: reason; upstream_error: status, failure, timeout')

const approvalResponse = z.object({
  type: z.enum(['executed', 'denied', 'upstream_error']),
  message: z.string(),
  result,
  receipt,
  revertActionId: z.string().nullable(),
  revertMessage: z.string().nullable(),
})

const idParams = z.object({ actionId: z.string().min(1).max(128) })

/**
 * The list's cursor: opaque to clients (base64url of `<createdAt>.<actionId>`), so a page resumes
 * after the last action it showed even when that action has since been approved or expired.
 */
export function encodeActionCursor(p: ActionPosition): string {
  return Buffer.from(`${p.createdAt}.${p.actionId}`, 'utf8').toString('base64url')
}

export function decodeActionCursor(cursor: string): ActionPosition | null {
  const m = /^(\d{1,15})\.([0-9A-Za-z_]{1,64})$/.exec(Buffer.from(cursor, 'base64url').toString('utf8'))
  if (!m?.[1] || !m[2]) return null
  const p = { createdAt: Number(m[1]), actionId: m[2] }
  // Only the exact text nextAfter gave (base64url decoding forgives stray characters).
  return encodeActionCursor(p) === cursor ? p : null
}

const listQuery = z.object({
  after: z
    .string()
    .max(128)
    .refine((s) => decodeActionCursor(s) !== null, 'not a cursor this list returned as nextAfter')
    .optional()
    .describe('Resume after the page that returned this `nextAfter`'),
  limit: z.coerce.number().int().min(1).max(1000).default(100),
})

export function actionsRoutes(deps: {
  approvals: ApprovalService
  auth: Authenticator
}): FastifyPluginAsyncZod {
  return async (app) => {
    // Admin keys only: an agent must never approve (or even list) its own pending writes.
    const admin = requireKey(deps.auth, { scope: 'admin' })

    app.get(
      '/v1/agent/actions',
      {
        schema: {
          summary: 'List the tenant’s pending, unexpired agent actions, oldest first',
          description:
            'At most `limit` actions (1..1000, default 100). `nextAfter` is an opaque cursor to pass as `after` for the next page; null when this page is the last.',
          querystring: listQuery,
          response: {
            200: z.object({
              tenantId: z.string(),
              actions: z.array(action),
              nextAfter: z.string().nullable(),
            }),
          },
        },
        onRequest: admin,
      },
      async (req) => {
        const caller = keyCaller(req)
        const { after, limit } = req.query
        // `after` was validated as a cursor by the schema.
        const position = after ? decodeActionCursor(after) : null
        const page = await deps.approvals.list(caller, position ? { limit, after: position } : { limit })
        return {
          tenantId: caller.tenantId,
          actions: page.actions,
          nextAfter: page.next ? encodeActionCursor(page.next) : null,
        }
      },
    )

    app.get(
      '/v1/agent/actions/:actionId',
      {
        schema: {
          summary: 'One pending action, with the staged request readable',
          params: idParams,
          response: { 200: action },
        },
        onRequest: admin,
      },
      async (req) => deps.approvals.get(keyCaller(req), req.params.actionId),
    )

    app.post(
      '/v1/agent/actions/:actionId/approve',
      {
        schema: {
          summary: 'Approve a pending agent action: re-check, TOTP when step-up is required, then write',
          description:
            'Body: totpCode (authenticator or backup code; required while the re-check says STEP_UP) and params (edits merged over the staged params, re-validated). 200 executed or denied; 401 totp_required / totp_invalid; 404 action_not_found; 409 action_system_changed (the system changed since staging: nothing sent); 429 approval_locked; 502 upstream_error (the action is pending again). See docs/execute.md.',
          params: idParams,
          body: z
            .object({
              totpCode: z.string().max(64).optional(),
              params: z.record(z.string(), z.unknown()).optional(),
            })
            .strict()
            .nullish(),
          response: {
            200: approvalResponse,
            502: approvalResponse.extend({ error: z.string(), code: z.literal(ERRORS.upstreamError.code) }),
          },
        },
        onRequest: admin,
      },
      async (req, reply) => {
        const out = await deps.approvals.approve(keyCaller(req), req.params.actionId, req.body ?? {})
        if (out.type === 'upstream_error')
          // Not our error (no error log): the upstream failed after the write was authorised.
          return reply
            .code(502)
            .send({ error: ERRORS.upstreamError.message, code: ERRORS.upstreamError.code, ...out })
        return reply.code(200).send(out)
      },
    )

    app.post(
      '/v1/agent/actions/:actionId/dismiss',
      {
        schema: {
          summary: 'Refuse a pending agent action: it is deleted and never written',
          description:
            'Body (optional): reason (written into the ACTION_DISMISSED receipt). 200 with the receipt; 404 action_not_found when it was approved, dismissed or expired first. No code is needed: refusing a write never writes anything.',
          params: idParams,
          body: z
            .object({ reason: z.string().max(500).optional() })
            .strict()
            .nullish(),
          response: { 200: z.object({ actionId: z.string(), dismissed: z.literal(true), receipt }) },
        },
        onRequest: admin,
      },
      async (req) => {
        const summary = await deps.approvals.dismiss(
          keyCaller(req),
          req.params.actionId,
          req.body?.reason ?? null,
        )
        return { actionId: req.params.actionId, dismissed: true as const, receipt: summary }
      },
    )
  }
}
