import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod'
import { z } from 'zod'
import type { Clock } from '../core/clock.js'
import { SANDBOX_VERB } from '../core/verbs.js'
import type { SandboxService } from '../sandbox/sandbox-service.js'
import type { RateLimitStore } from '../store/ports/rate-limit.js'
import { limitPerIp } from './http/rate-limit.js'

export function sandboxRoutes(deps: {
  sandbox: SandboxService
  rateLimits: RateLimitStore
  clock: Clock
  perIpPerMinute: number
}): FastifyPluginAsyncZod {
  return async (app) => {
    app.post(
      '/v1/sandbox',
      {
        schema: {
          summary: 'Keyless sandbox: a 90-second demo grant for demo_write on a demo- target',
          body: z
            .object({
              verb: z.literal(SANDBOX_VERB),
              target: z.string().regex(/^demo-[A-Za-z0-9._-]{1,100}$/, {
                message: 'must start with demo- (letters, digits, . _ - after it)',
              }),
            })
            .strict(),
          response: {
            201: z.object({
              grantId: z.string(),
              verb: z.string(),
              target: z.string(),
              expiresAt: z.number().int(),
              ttlSeconds: z.number().int(),
            }),
          },
        },
        onRequest: limitPerIp(deps.rateLimits, deps.clock, 'sandbox', deps.perIpPerMinute, 60),
      },
      async (req, reply) => reply.code(201).send(await deps.sandbox.mint(req.body.target)),
    )
  }
}
