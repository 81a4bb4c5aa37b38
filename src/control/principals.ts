import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod'
import { z } from 'zod'
import type { Authenticator } from '../identity/authenticator.js'
import type { PrincipalService } from '../identity/principal-service.js'
import { keyCaller, requireKey } from './http/auth.js'

const principal = z.object({
  principalId: z.string(),
  tenantId: z.string(),
  name: z.string(),
  disabled: z.boolean(),
  keyCount: z.number().int(),
  createdAt: z.number().int(),
  deletedAt: z.number().int().nullable(),
})

const idParams = z.object({ principalId: z.string().min(1).max(128) })

export function principalsRoutes(deps: {
  principals: PrincipalService
  auth: Authenticator
}): FastifyPluginAsyncZod {
  return async (app) => {
    const admin = requireKey(deps.auth, { scope: 'admin' })

    app.post(
      '/v1/principals',
      {
        schema: {
          summary: 'Create a principal',
          body: z.object({ name: z.string(), disabled: z.boolean().optional() }).strict(),
          response: { 201: principal },
        },
        onRequest: admin,
      },
      async (req, reply) => reply.code(201).send(await deps.principals.create(keyCaller(req), req.body)),
    )

    app.get(
      '/v1/principals',
      {
        schema: {
          summary: 'List principals, oldest first',
          querystring: z.object({ include_deleted: z.string().max(16).optional() }),
          response: { 200: z.object({ tenantId: z.string(), principals: z.array(principal) }) },
        },
        onRequest: admin,
      },
      async (req) => {
        const caller = keyCaller(req)
        const principals = await deps.principals.list(caller, req.query.include_deleted === '1')
        return { tenantId: caller.tenantId, principals }
      },
    )

    app.get(
      '/v1/principals/:principalId',
      {
        schema: {
          summary: 'Get a principal (tombstoned ones too)',
          params: idParams,
          response: { 200: principal },
        },
        onRequest: admin,
      },
      async (req) => deps.principals.get(keyCaller(req), req.params.principalId),
    )

    app.patch(
      '/v1/principals/:principalId',
      {
        schema: {
          summary: 'Rename, disable or enable a principal',
          params: idParams,
          body: z
            .object({ name: z.string().optional(), disabled: z.boolean().optional() })
            .strict()
            .nullish(),
          response: { 200: principal },
        },
        onRequest: admin,
      },
      async (req) => deps.principals.update(keyCaller(req), req.params.principalId, req.body ?? {}),
    )

    app.post(
      '/v1/principals/:principalId/revoke',
      {
        schema: {
          summary: 'Revoke every live key of a principal',
          params: idParams,
          body: z
            .object({ reason: z.string().max(500).optional() })
            .strict()
            .nullish(),
          response: {
            200: z.object({
              principalId: z.string(),
              revokedCount: z.number().int(),
              revokedKeys: z.array(z.string()),
            }),
          },
        },
        onRequest: admin,
      },
      async (req) =>
        deps.principals.revokeKeys(keyCaller(req), req.params.principalId, req.body?.reason ?? null),
    )

    app.delete(
      '/v1/principals/:principalId',
      {
        schema: {
          summary: 'Tombstone a principal: revokes its keys and frees its name',
          params: idParams,
          response: { 200: principal },
        },
        onRequest: admin,
      },
      async (req) => deps.principals.remove(keyCaller(req), req.params.principalId),
    )
  }
}
