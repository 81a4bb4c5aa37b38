import type { FastifyInstance, FastifyRequest } from 'fastify'
import { ERRORS, fail } from '../../core/errors.js'
import { principalsPage } from '../pages/principals.js'
import { sendPage, sessionOf } from '../portal-http.js'
import type { PortalSession } from '../portal-sessions.js'
import { type PortalDeps, requirePage, signedForm } from './route-kit.js'

/** Principals and their keys: disable, enable, revoke keys. */
export function principalRoutes(app: FastifyInstance, deps: PortalDeps): void {
  const principalRows = async (session: PortalSession) => {
    const list = await deps.principals.list(session.caller, false)
    return Promise.all(
      list.map(async (principal) => ({
        principal,
        keys: await deps.sor.stores.keys.liveKeysOfPrincipal(session.caller.tenantId, principal.principalId),
      })),
    )
  }

  app.get('/portal/principals', { preHandler: requirePage }, async (req, reply) => {
    const session = sessionOf(req)
    return sendPage(reply, principalsPage(session, await principalRows(session)))
  })

  const principalId = (req: FastifyRequest) => {
    const id = (req.params as { principalId: string }).principalId
    if (id.length > 128) fail(ERRORS.principalNotFound)
    return id
  }

  app.post('/portal/principals/:principalId/state', async (req, reply) => {
    const { session, form } = signedForm(req)
    if (form.disabled !== 'true' && form.disabled !== 'false')
      fail(ERRORS.invalidRequest, undefined, { message: 'disabled must be true or false' })
    const p = await deps.principals.update(session.caller, principalId(req), {
      disabled: form.disabled === 'true',
    })
    return sendPage(
      reply,
      principalsPage(session, await principalRows(session), {
        kind: 'ok',
        text: `${p.name} is ${p.disabled ? 'disabled' : 'enabled'}.`,
      }),
    )
  })

  app.post('/portal/principals/:principalId/revoke-keys', async (req, reply) => {
    const { session, form } = signedForm(req)
    const reason = (form.reason ?? '').trim().slice(0, 500)
    const out = await deps.principals.revokeKeys(session.caller, principalId(req), reason || null)
    return sendPage(
      reply,
      principalsPage(session, await principalRows(session), {
        kind: 'ok',
        text: `Revoked ${out.revokedCount} key(s) of ${out.principalId}.`,
      }),
    )
  })
}
