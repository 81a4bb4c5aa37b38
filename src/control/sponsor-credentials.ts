import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod'
import { z } from 'zod'
import { type Authenticator, bearerOf } from '../identity/authenticator.js'
import type { IssuanceService } from '../identity/issuance-service.js'
import { requireSponsor, sponsorCaller } from './http/auth.js'

/** Sponsor-token rotation and TOTP re-enrolment (contract §2): the S-only credential endpoints. */
export function sponsorCredentialRoutes(deps: {
  issuance: IssuanceService
  auth: Authenticator
}): FastifyPluginAsyncZod {
  return async (app) => {
    const sponsor = requireSponsor(deps.auth)

    app.post(
      '/v1/sponsor/rotate',
      {
        schema: {
          summary: 'Replace the sponsor token; the old one stops working at once',
          response: { 200: z.object({ tenantId: z.string(), sponsorToken: z.string() }) },
        },
        onRequest: sponsor,
      },
      async (req, reply) => {
        const { tenantId } = sponsorCaller(req)
        reply.header('Cache-Control', 'no-store')
        const presented = bearerOf(req.headers.authorization) as string
        return { tenantId, sponsorToken: await deps.issuance.rotateSponsorToken(tenantId, presented) }
      },
    )

    app.post(
      '/v1/sponsor/totp',
      {
        schema: {
          summary: 'Re-enrol the step-up authenticator; the old secret and backup codes stop working',
          body: z
            .object({ label: z.string().min(1).max(100).optional() })
            .strict()
            .nullish(),
          response: {
            200: z.object({
              tenantId: z.string(),
              totp: z.object({
                secret: z.string(),
                otpauthUrl: z.string(),
                backupCodes: z.array(z.string()),
              }),
            }),
          },
        },
        onRequest: sponsor,
      },
      async (req, reply) => {
        const { tenantId } = sponsorCaller(req)
        reply.header('Cache-Control', 'no-store')
        return { tenantId, totp: await deps.issuance.enrolTotp(tenantId, req.body?.label ?? tenantId) }
      },
    )
  }
}
