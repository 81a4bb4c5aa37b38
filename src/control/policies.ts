import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod'
import { z } from 'zod'
import type { Authenticator } from '../identity/authenticator.js'
import type { PolicyService } from '../policy/policy-service.js'
import { keyCaller, requireKey } from './http/auth.js'

const modeMap = z.record(z.string(), z.string())
const policyObject = z
  .object({
    policyId: z.string(),
    scope: z.enum(['tenant', 'environment', 'principal']),
    environment: z.string().nullable(),
    policy: modeMap,
    version: z.number().int(),
    updatedAt: z.number().int().nullable(),
    tenantId: z.string(),
    effectivePolicy: modeMap.optional(),
    policyProvenance: modeMap.optional(),
    principalId: z.string().optional(),
    principalName: z.string().optional(),
    inert: z.boolean().optional(),
    modes: z.array(z.string()).optional(),
    verbs: z.array(z.string()).optional(),
    customVerbs: z.array(z.string()).optional(),
  })
  .describe('A policy object (interface.md "Policy object")')

/** A bare map of verb to mode, or the same wrapped as `{policy: {...}}`; validated by the service for its error codes. */
const putBody = z
  .record(z.string(), z.unknown())
  .nullish()
  .describe(
    'verb → mode (allow, deny, require_grant, step_up; principal overrides also inherit), bare or as {policy: {...}}',
  )

export function policiesRoutes(deps: {
  policies: PolicyService
  auth: Authenticator
}): FastifyPluginAsyncZod {
  return async (app) => {
    const admin = requireKey(deps.auth, { scope: 'admin' })
    const ok = { 200: policyObject }

    app.get(
      '/v1/policy',
      { schema: { summary: 'The tenant default policy, with customVerbs', response: ok }, onRequest: admin },
      async (req) => deps.policies.getTenant(keyCaller(req)),
    )
    app.put(
      '/v1/policy',
      {
        schema: { summary: 'Merge verbs into the tenant default policy', body: putBody, response: ok },
        onRequest: admin,
      },
      async (req) => deps.policies.putTenant(keyCaller(req), req.body),
    )

    app.get(
      '/v1/policies',
      {
        schema: {
          summary: 'Every configured layer: tenant default, then environments, then principal overrides',
          response: {
            200: z.object({
              tenantId: z.string(),
              environments: z.array(z.string()),
              policies: z.array(policyObject),
            }),
          },
        },
        onRequest: admin,
      },
      async (req) => deps.policies.list(keyCaller(req)),
    )

    const envParams = z.object({ env: z.string().max(64) })
    app.get(
      '/v1/policies/environments/:env',
      {
        schema: {
          summary: 'An environment override with its effective policy',
          params: envParams,
          response: ok,
        },
        onRequest: admin,
      },
      async (req) => deps.policies.getEnvironment(keyCaller(req), req.params.env),
    )
    app.put(
      '/v1/policies/environments/:env',
      {
        schema: {
          summary: 'Merge verbs into an environment override',
          params: envParams,
          body: putBody,
          response: ok,
        },
        onRequest: admin,
      },
      async (req) => deps.policies.putEnvironment(keyCaller(req), req.params.env, req.body),
    )

    const prnParams = z.object({ principalId: z.string().min(1).max(128) })
    app.get(
      '/v1/policies/principals/:principalId',
      {
        schema: {
          summary:
            "A principal override; `environment` folds that environment's override into the middle layer",
          params: prnParams,
          querystring: z.object({ environment: z.string().max(64).optional() }),
          response: ok,
        },
        onRequest: admin,
      },
      async (req) =>
        deps.policies.getPrincipal(keyCaller(req), req.params.principalId, req.query.environment),
    )
    app.put(
      '/v1/policies/principals/:principalId',
      {
        schema: {
          summary: 'Merge verbs into a principal override (inherit removes a verb)',
          params: prnParams,
          body: putBody,
          response: ok,
        },
        onRequest: admin,
      },
      async (req) => deps.policies.putPrincipal(keyCaller(req), req.params.principalId, req.body),
    )
  }
}
