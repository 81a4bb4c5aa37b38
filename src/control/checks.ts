import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod'
import { z } from 'zod'
import type { CheckService } from '../decision/check-service.js'
import type { TokenService } from '../decision/token-service.js'
import type { Authenticator } from '../identity/authenticator.js'
import { EXECUTE_ROUTE_BODY_LIMIT } from './execute.js'
import { keyCaller, requireKey } from './http/auth.js'

const checkBody = z
  .object({
    verb: z.string().min(1).max(128),
    target: z.string().max(1000).optional(),
    environment: z.string().max(64).optional(),
    grantId: z.string().min(1).max(128).optional(),
    request: z
      .object({
        systemId: z.string().min(1).max(128),
        method: z.string().min(1).max(16),
        path: z.string().min(1).max(4096),
        body: z.record(z.string(), z.unknown()).optional(),
      })
      .strict()
      .optional()
      .describe('Bind the ALLOW to this upstream request: the answer carries a single-use leaseId'),
    tool: z
      .object({ name: z.string().min(1).max(128), params: z.record(z.string(), z.unknown()) })
      .strict()
      .optional()
      .describe('On STEP_UP, stage this tool call as a pending agent action'),
  })
  .strict()

const checkResponse = z.object({
  decision: z.enum(['ALLOW', 'DENY', 'STEP_UP']),
  receiptId: z.string(),
  seq: z.number().int(),
  verb: z.string(),
  requestedVerb: z.string(),
  mode: z.string().nullable(),
  provenance: z.string(),
  policyVersion: z.number().int(),
  reason: z.string(),
  token: z.string().optional(),
  leaseId: z.string().optional(),
  grantId: z.string().optional(),
  actionId: z.string().optional(),
  expiresAt: z.number().int().optional(),
})

const verdict = z.object({
  valid: z.boolean(),
  reason: z.enum(['malformed', 'bad_signature', 'expired', 'revoked', 'wrong_tenant', 'used']).optional(),
  tenantId: z.string().optional(),
  principalId: z.string().optional(),
  keyId: z.string().optional(),
  verb: z.string().optional(),
  target: z.string().nullable().optional(),
  expiresAt: z.number().int().optional(),
})

/** Far above any ALLOW token writegate signs (a few hundred characters). */
const MAX_TOKEN_CHARS = 8192

export function checksRoutes(deps: {
  checks: CheckService
  tokens: TokenService
  auth: Authenticator
}): FastifyPluginAsyncZod {
  return async (app) => {
    app.post(
      '/v1/check',
      {
        schema: {
          summary: 'Ask for a decision: ALLOW, DENY or STEP_UP (each writes a receipt)',
          description:
            'Safe to retry: every call is a new decision with its own receipt. 402 when the monthly quota is used up (no receipt).',
          body: checkBody,
          response: { 200: checkResponse },
        },
        // Dead keys still get an answer (DENY, on record), and agent keys may check.
        // A request body may be as large as /v1/execute accepts, plus its envelope.
        bodyLimit: EXECUTE_ROUTE_BODY_LIMIT,
        onRequest: requireKey(deps.auth, { scope: 'agent', allowDead: true }),
      },
      async (req) => deps.checks.check(keyCaller(req), req.body),
    )

    app.post(
      '/v1/tokens/verify',
      {
        schema: {
          summary: 'Validate an ALLOW token',
          body: z.object({ token: z.string() }).strict(),
          response: { 200: verdict },
        },
        onRequest: requireKey(deps.auth, { scope: 'agent' }),
      },
      // Any string is a token to judge (interface.md: only a bad API key is not a 200); one
      // longer than any token writegate signs is malformed without being read.
      async (req) =>
        req.body.token.length > MAX_TOKEN_CHARS
          ? { valid: false as const, reason: 'malformed' as const }
          : deps.tokens.verify(keyCaller(req), req.body.token),
    )
  }
}
