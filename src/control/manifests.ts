import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod'
import { z } from 'zod'
import type { Authenticator } from '../identity/authenticator.js'
import type { ManifestStore } from '../store/ports/manifests.js'
import { keyCaller, requireKey } from './http/auth.js'

export function manifestsRoutes(deps: {
  auth: Authenticator
  manifests: ManifestStore
}): FastifyPluginAsyncZod {
  return async (app) => {
    app.get(
      '/v1/manifests',
      {
        schema: {
          summary: 'The latest signed scanner manifest entry per repo',
          description:
            'Read-only: manifests are imported by `writegate manifests import <file>` after their Ed25519 signature is checked against the configured scanner key.',
          response: {
            200: z.object({
              tenantId: z.string(),
              repos: z.array(
                z.object({
                  repoId: z.string(),
                  commitSha: z.string(),
                  scannerVersion: z.string(),
                  createdAt: z.number().int(),
                }),
              ),
            }),
          },
        },
        onRequest: requireKey(deps.auth, { scope: 'admin' }),
      },
      async (req) => {
        const { tenantId } = keyCaller(req)
        return { tenantId, repos: await deps.manifests.latest(tenantId) }
      },
    )
  }
}
