import { readFileSync } from 'node:fs'
import type { FastifyInstance } from 'fastify'
import { ERRORS, fail } from '../core/errors.js'
import { installPortalHttp } from './portal-http.js'
import { approvalRoutes } from './routes/approval-routes.js'
import { auditRoutes } from './routes/audit-routes.js'
import { killSwitchRoutes } from './routes/kill-switch-routes.js'
import { liveRoutes } from './routes/live-routes.js'
import { overviewRoutes } from './routes/overview-routes.js'
import { policyRoutes } from './routes/policy-routes.js'
import { principalRoutes } from './routes/principal-routes.js'
import type { PortalDeps } from './routes/route-kit.js'
import { signInRoutes } from './routes/sign-in-routes.js'

export type { PortalDeps } from './routes/route-kit.js'

const ASSETS = {
  'portal.css': { type: 'text/css; charset=utf-8', body: readAsset('portal.css') },
  'portal.js': { type: 'text/javascript; charset=utf-8', body: readAsset('portal.js') },
} as const

function readAsset(name: string): string {
  return readFileSync(new URL(`./assets/${name}`, import.meta.url), 'utf8')
}

/** The portal: its HTTP edges (cookies, CSP, CSRF, forms), its assets and one route module per page. */
export function portalRoutes(deps: PortalDeps) {
  return async (app: FastifyInstance): Promise<void> => {
    installPortalHttp(app, deps.sessions)
    app.get('/portal/assets/:name', async (req, reply) => {
      const name = (req.params as { name: string }).name
      // Own members only: `constructor` or `toString` is no asset (a lookup found Object's, a 500).
      if (!Object.hasOwn(ASSETS, name)) fail(ERRORS.notFound)
      const asset = ASSETS[name as keyof typeof ASSETS]
      return reply.type(asset.type).send(asset.body)
    })
    for (const routes of [
      signInRoutes,
      overviewRoutes,
      liveRoutes,
      approvalRoutes,
      killSwitchRoutes,
      policyRoutes,
      principalRoutes,
      auditRoutes,
    ])
      routes(app, deps)
  }
}
