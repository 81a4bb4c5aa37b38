import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod'
import { z } from 'zod'
import type { Authenticator } from '../identity/authenticator.js'
import type { VerbService } from '../policy/verb-service.js'
import { keyCaller, requireKey } from './http/auth.js'

const verbRecord = z.object({
  name: z.string(),
  builtin: z.boolean(),
  status: z.enum(['live', 'deprecated']),
  defaultMode: z.string().optional(),
  description: z.string().optional(),
  aliasOf: z.string().nullable().optional(),
  createdAt: z.number().int().optional(),
  deprecatedAt: z.number().int().nullable().optional(),
})

const nameParams = z.object({ name: z.string().min(1).max(128) })

export function verbsRoutes(deps: { verbs: VerbService; auth: Authenticator }): FastifyPluginAsyncZod {
  return async (app) => {
    const admin = requireKey(deps.auth, { scope: 'admin' })

    app.post(
      '/v1/verbs',
      {
        schema: {
          summary: 'Register a custom verb (domain.action, stored lowercase)',
          body: z
            .object({ name: z.string().max(4096), description: z.string().max(500).optional() })
            .strict(),
          response: { 201: verbRecord },
        },
        onRequest: admin,
      },
      async (req, reply) => reply.code(201).send(await deps.verbs.create(keyCaller(req), req.body)),
    )

    app.get(
      '/v1/verbs',
      {
        schema: {
          summary: 'The vocabulary: built-ins, then custom verbs',
          response: { 200: z.object({ tenantId: z.string(), verbs: z.array(verbRecord) }) },
        },
        onRequest: admin,
      },
      async (req) => deps.verbs.list(keyCaller(req)),
    )

    app.get(
      '/v1/verbs/:name',
      {
        schema: {
          summary: 'One custom verb, by case-insensitive name',
          params: nameParams,
          response: { 200: verbRecord },
        },
        onRequest: admin,
      },
      async (req) => deps.verbs.get(keyCaller(req), req.params.name),
    )

    app.patch(
      '/v1/verbs/:name',
      {
        schema: {
          summary: 'Rename (leaving a deprecated alias and migrating policies) or redescribe a custom verb',
          params: nameParams,
          body: z
            .object({ name: z.string().max(4096).optional(), description: z.string().max(500).optional() })
            .strict()
            .nullish(),
          response: { 200: verbRecord },
        },
        onRequest: admin,
      },
      async (req) => deps.verbs.update(keyCaller(req), req.params.name, req.body ?? {}),
    )
  }
}
