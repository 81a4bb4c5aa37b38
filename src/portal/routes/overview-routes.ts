import type { FastifyInstance } from 'fastify'
import { clientLeaves } from '../../node-http/client-leaves.js'
import { overviewData } from '../overview-data.js'
import { overviewPage } from '../pages/overview.js'
import { sendPage, sessionOf } from '../portal-http.js'
import { type PortalDeps, requirePage } from './route-kit.js'

/** The overview: 24-hour decisions, 30 days of writes, the checkpoint. */
export function overviewRoutes(app: FastifyInstance, deps: PortalDeps): void {
  app.get('/portal', { preHandler: requirePage }, async (req, reply) => {
    const session = sessionOf(req)
    const data = await overviewData(
      {
        stores: deps.sor.stores,
        reader: deps.reader,
        checkpoints: deps.checkpoints,
        publicKey: deps.publicKey,
        clock: deps.clock,
      },
      session.caller.tenantId,
      clientLeaves(reply.raw),
    )
    return sendPage(reply, overviewPage(session, data))
  })
}
