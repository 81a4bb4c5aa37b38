import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod'
import { z } from 'zod'
import { ERRORS, fail } from '../core/errors.js'
import type { Authenticator } from '../identity/authenticator.js'
import {
  credentialRefSchema,
  definitionProblems,
  graphqlBindingSchema,
  mcpBindingSchema,
  routeSchema,
  systemDefinitionShape,
  systemIdSchema,
  systemSchema,
  toolSchema,
} from '../systems/system-definition.js'
import type { SystemService } from '../systems/system-service.js'
import { keyCaller, requireKey } from './http/auth.js'

const record = z.object({
  systemId: z.string(),
  tenantId: z.string(),
  version: z.number().int().describe('1 at creation, +1 on every replacement'),
  kind: z.enum(['http', 'mcp', 'graphql']),
  mcp: mcpBindingSchema.optional(),
  graphql: graphqlBindingSchema.optional(),
  upstream: z.string(),
  credential: credentialRefSchema.optional().describe('A reference (variable or file), never a secret value'),
  caBundle: z.string().optional(),
  publicOnly: z
    .literal(true)
    .optional()
    .describe(
      'Read-only, set by the control plane: the upstream was vetted as public when an admin last changed it, and every connection to it must reach a public address',
    ),
  baseUrlEnv: z.string().optional(),
  reads: z.enum(['pass', 'gate']),
  routes: z.array(routeSchema),
  tools: z.array(toolSchema),
  createdAt: z.number().int(),
  updatedAt: z.number().int(),
})

const idParams = z.object({ systemId: z.string().min(1).max(128) })

/** A PUT replaces the whole definition; `ifVersion` makes it conditional, `systemId` (if sent) must name the path's. */
const replaceBody = z
  .object({
    systemId: systemIdSchema.optional(),
    ifVersion: z.number().int().min(1).optional(),
    ...systemDefinitionShape,
  })
  .strict()
  .superRefine((s, ctx) => {
    for (const p of definitionProblems(s)) ctx.addIssue({ code: 'custom', path: p.path, message: p.message })
  })

const deleteQuery = z.object({ ifVersion: z.coerce.number().int().min(1).optional() }).strict()

/**
 * `/v1/systems`: enrolled systems as a resource of the caller's tenant (admin keys; agent keys
 * get 403 as for policies). Every change is versioned, audited and pushed to every proxy in
 * the tenant's snapshot. A credential is a reference the injecting process resolves: its
 * value is never sent here, stored or published.
 */
export function systemsRoutes(deps: { systems: SystemService; auth: Authenticator }): FastifyPluginAsyncZod {
  return async (app) => {
    const admin = requireKey(deps.auth, { scope: 'admin' })

    app.post(
      '/v1/systems',
      {
        schema: {
          summary: 'Enrol a system: fixed upstream origin, credential reference, routes and tools',
          description:
            'Writes a SYSTEM_CREATE receipt and bumps the tenant version: every proxy of the tenant gates writes to it under the new snapshot. 400 names each field at fault (placeholders the path does not define, duplicate routes, an upstream that is not an origin, unknown verbs as `unknown_verb`, private upstreams as `private_upstream`); 409 `system_exists` (ids are never reused), `tool_taken`, `system_limit_reached`. See docs/proxy.md.',
          body: systemSchema,
          response: { 201: record },
        },
        onRequest: admin,
      },
      async (req, reply) => reply.code(201).send(await deps.systems.create(keyCaller(req), req.body)),
    )

    app.get(
      '/v1/systems',
      {
        schema: {
          summary: 'The tenant’s enrolled systems, by id',
          response: { 200: z.object({ tenantId: z.string(), systems: z.array(record) }) },
        },
        onRequest: admin,
      },
      async (req) => {
        const caller = keyCaller(req)
        return { tenantId: caller.tenantId, systems: await deps.systems.list(caller) }
      },
    )

    app.get(
      '/v1/systems/:systemId',
      {
        schema: {
          summary: 'One enrolled system (404 `system_not_found` for a missing, deleted or other tenant’s id)',
          params: idParams,
          response: { 200: record },
        },
        onRequest: admin,
      },
      async (req) => deps.systems.get(keyCaller(req), req.params.systemId),
    )

    app.put(
      '/v1/systems/:systemId',
      {
        schema: {
          summary: 'Replace a system’s whole definition (version +1)',
          description:
            'Optional `ifVersion`: 409 `version_conflict` unless it is the current version. Writes a SYSTEM_UPDATE receipt with the previous and new version and digests of the routes and tools. Linearizable: a write sent after this returns is decided under the new routes on every proxy.',
          params: idParams,
          body: replaceBody,
          response: { 200: record },
        },
        onRequest: admin,
      },
      async (req) => {
        const { ifVersion, systemId, ...definition } = req.body
        if (systemId !== undefined && systemId !== req.params.systemId)
          fail(
            ERRORS.invalidRequest,
            { issues: [{ path: 'systemId', message: 'must be the id in the path' }] },
            { message: 'invalid body: systemId: must be the id in the path' },
          )
        return deps.systems.replace(
          keyCaller(req),
          { ...definition, systemId: req.params.systemId },
          { ifVersion },
        )
      },
    )

    app.delete(
      '/v1/systems/:systemId',
      {
        schema: {
          summary: 'Delete a system (a tombstone: its id is never reused)',
          description:
            'Optional query `ifVersion`. Writes a SYSTEM_DELETE receipt; writes to it are refused from then on.',
          params: idParams,
          querystring: deleteQuery,
          response: { 200: z.object({ systemId: z.string(), deleted: z.literal(true) }) },
        },
        onRequest: admin,
      },
      async (req) => {
        await deps.systems.remove(keyCaller(req), req.params.systemId, { ifVersion: req.query.ifVersion })
        return { systemId: req.params.systemId, deleted: true as const }
      },
    )
  }
}
