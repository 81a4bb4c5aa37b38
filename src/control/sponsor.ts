import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod'
import { z } from 'zod'
import type { Authenticator } from '../identity/authenticator.js'
import { grantRequest } from '../sponsor/grant-request.js'
import type { SponsorService } from '../sponsor/sponsor-service.js'
import { requireSponsor, sponsorCaller } from './http/auth.js'

const target = z.union([
  z.object({ principalId: z.string() }),
  z.object({ keyId: z.string() }),
  z.object({ all: z.literal(true) }),
])
const rosterBody = z
  .object({
    principalId: z.string().min(1).max(128).optional(),
    keyId: z.string().min(1).max(128).optional(),
    all: z.boolean().optional(),
    reason: z.string().max(500).optional(),
  })
  .strict()
  .describe('Exactly one of principalId, keyId or all: true')

export function sponsorRoutes(deps: { sponsor: SponsorService; auth: Authenticator }): FastifyPluginAsyncZod {
  return async (app) => {
    const sponsor = requireSponsor(deps.auth)

    app.post(
      '/v1/grants',
      {
        schema: {
          summary: 'Approve one write: mint a single-use grant (not idempotent)',
          body: grantRequest,
          response: {
            201: z.object({
              grantId: z.string(),
              verb: z.string(),
              target: z.string().nullable(),
              principalId: z.string().nullable(),
              environment: z.string().nullable(),
              expiresAt: z.number().int(),
            }),
          },
        },
        onRequest: sponsor,
      },
      async (req, reply) => reply.code(201).send(await deps.sponsor.grant(sponsorCaller(req), req.body)),
    )

    app.post(
      '/v1/revoke',
      {
        schema: {
          summary: 'Kill switch: revoke a principal, a key or every agent (never quota-gated)',
          body: rosterBody,
          response: { 200: z.object({ revoked: target, receiptId: z.string() }) },
        },
        onRequest: sponsor,
      },
      async (req) => deps.sponsor.revoke(sponsorCaller(req), req.body),
    )

    app.post(
      '/v1/reinstate',
      {
        schema: {
          summary: 'Undo a revocation',
          body: rosterBody,
          response: { 200: z.object({ reinstated: target, receiptId: z.string() }) },
        },
        onRequest: sponsor,
      },
      async (req) => deps.sponsor.reinstate(sponsorCaller(req), req.body),
    )

    app.get(
      '/v1/revoked',
      {
        schema: {
          summary: 'The revocation roster',
          response: {
            200: z.object({
              tenantId: z.string(),
              revoked: z.array(
                z.object({
                  principalId: z.string().optional(),
                  keyId: z.string().optional(),
                  all: z.literal(true).optional(),
                  reason: z.string().nullable(),
                  revokedAt: z.number().int(),
                }),
              ),
            }),
          },
        },
        onRequest: sponsor,
      },
      async (req) => deps.sponsor.revoked(sponsorCaller(req)),
    )
  }
}
