import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod'
import { z } from 'zod'
import type { Clock } from '../core/clock.js'
import type { Authenticator } from '../identity/authenticator.js'
import { bearerOf } from '../identity/authenticator.js'
import type { IssuanceService } from '../identity/issuance-service.js'
import type { RateLimitStore } from '../store/ports/rate-limit.js'
import { keyCaller, requireKey } from './http/auth.js'
import { limitPerIp } from './http/rate-limit.js'

const issueKeyBody = z
  .object({
    email: z.string().min(3).max(254),
    tenantName: z.string().min(1).max(64).optional(),
    inviteCode: z.string().min(1).max(200).optional(),
    principal_id: z.string().min(1).max(64).optional(),
    scope: z.enum(['admin', 'agent']).optional(),
  })
  .strict()

const issuedKey = z.object({
  apiKey: z.string(),
  keyId: z.string(),
  tenantId: z.string(),
  principalId: z.string(),
  scope: z.enum(['admin', 'agent']),
  sponsorToken: z.string().optional(),
  totp: z.object({ secret: z.string(), otpauthUrl: z.string(), backupCodes: z.array(z.string()) }).optional(),
})

const invite = z.object({ inviteCode: z.string(), tenantId: z.string(), expiresAt: z.number().int() })

export interface KeysRoutesDeps {
  issuance: IssuanceService
  auth: Authenticator
  rateLimits: RateLimitStore
  clock: Clock
  issuancePerIpPerHour: number
}

/** POST /v1/keys and POST /v1/tenant/invites. */
export function keysRoutes(deps: KeysRoutesDeps): FastifyPluginAsyncZod {
  return async (app) => {
    app.post(
      '/v1/keys',
      {
        schema: {
          summary: 'Issue an API key; the first key of an email creates the tenant',
          description:
            'Needs no credential. A later key for an email that owns a tenant needs proof: Authorization with a live API key or the sponsor token of that tenant, or an inviteCode. Limited to 10 per hour per client IP.',
          body: issueKeyBody,
          response: { 201: issuedKey },
        },
        onRequest: limitPerIp(deps.rateLimits, deps.clock, 'issuance', deps.issuancePerIpPerHour, 3600),
      },
      async (req, reply) => {
        const b = req.body
        const issued = await deps.issuance.issueKey({
          email: b.email,
          tenantName: b.tenantName,
          inviteCode: b.inviteCode,
          principalId: b.principal_id,
          scope: b.scope,
          bearer: bearerOf(req.headers.authorization),
        })
        reply.header('Cache-Control', 'no-store')
        return reply.code(201).send(issued)
      },
    )

    app.post(
      '/v1/tenant/invites',
      {
        schema: {
          summary: 'Create an invite code for the tenant (rotates the previous one)',
          response: { 201: invite },
        },
        onRequest: requireKey(deps.auth, { scope: 'admin' }),
      },
      async (req, reply) => {
        reply.header('Cache-Control', 'no-store')
        return reply.code(201).send(await deps.issuance.createInvite(keyCaller(req)))
      },
    )
  }
}
