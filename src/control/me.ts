import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod'
import { z } from 'zod'
import { type Clock, nowSeconds } from '../core/clock.js'
import { quotaPeriod, quotaStanding } from '../core/quota.js'
import type { Authenticator } from '../identity/authenticator.js'
import type { QuotaCounter } from '../store/ports/hot-store.js'
import type { SystemOfRecord } from '../store/ports/index.js'
import { keyCaller, requireKey } from './http/auth.js'

const meResponse = z.object({
  tenantId: z.string(),
  tenantName: z.string(),
  keyId: z.string(),
  principalId: z.string(),
  principalName: z.string(),
  scope: z.enum(['admin', 'agent']),
  quota: z.object({
    limit: z.number().int(),
    used: z.number().int(),
    remaining: z.number().int(),
    resetsAt: z.number().int(),
  }),
})

export interface MeDeps {
  auth: Authenticator
  sor: SystemOfRecord
  quota: QuotaCounter
  clock: Clock
  checksPerMonth: number
}

export function meRoutes(deps: MeDeps): FastifyPluginAsyncZod {
  return async (app) => {
    app.get(
      '/v1/me',
      {
        schema: {
          summary: 'The calling key: tenant, principal, scope and monthly check quota',
          response: { 200: meResponse },
        },
        onRequest: requireKey(deps.auth, { scope: 'agent' }),
      },
      async (req) => {
        const caller = keyCaller(req)
        const tenant = await deps.sor.stores.tenants.get(caller.tenantId)
        const now = nowSeconds(deps.clock)
        const used = await deps.quota.used(caller.tenantId, caller.keyId, quotaPeriod(now))
        return {
          tenantId: caller.tenantId,
          tenantName: tenant?.name ?? '',
          keyId: caller.keyId,
          principalId: caller.principalId,
          principalName: caller.principalName,
          scope: caller.scope,
          quota: quotaStanding(deps.checksPerMonth, Math.min(used, deps.checksPerMonth), now),
        }
      },
    )
  }
}
