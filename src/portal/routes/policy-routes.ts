import type { FastifyInstance } from 'fastify'
import { ERRORS, fail } from '../../core/errors.js'
import { ENVIRONMENTS } from '../../core/verbs.js'
import type { PolicyObject } from '../../policy/policy-view.js'
import { policiesPage } from '../pages/policies.js'
import { sendPage, sessionOf } from '../portal-http.js'
import type { PortalSession } from '../portal-sessions.js'
import { type PortalDeps, portalJson, refusal, requirePage, signedForm } from './route-kit.js'

/** The three policy layers, effective policy and provenance, edited through the API's validation. */
export function policyRoutes(app: FastifyInstance, deps: PortalDeps): void {
  const layers = async (session: PortalSession): Promise<PolicyObject[]> => {
    const c = session.caller
    const listed = await deps.policies.list(c)
    const out: PolicyObject[] = [await deps.policies.getTenant(c)]
    for (const env of ENVIRONMENTS) out.push(await deps.policies.getEnvironment(c, env))
    for (const p of listed.policies)
      if (p.scope === 'principal' && p.principalId)
        out.push(await deps.policies.getPrincipal(c, p.principalId, undefined))
    return out
  }

  app.get('/portal/policies', { preHandler: requirePage }, async (req, reply) => {
    const session = sessionOf(req)
    return sendPage(reply, policiesPage(session, await layers(session)))
  })

  app.post('/portal/policies', async (req, reply) => {
    const { session, form } = signedForm(req)
    const scope = form.scope ?? ''
    const key = form.key ?? ''
    const text = form.policy ?? ''
    try {
      const body = portalJson(text, 'the policy')
      const c = session.caller
      if (scope === 'tenant') await deps.policies.putTenant(c, body)
      else if (scope === 'environment') await deps.policies.putEnvironment(c, key, body)
      else if (scope === 'principal') await deps.policies.putPrincipal(c, key, body)
      else fail(ERRORS.invalidRequest, undefined, { message: 'unknown policy layer' })
      return sendPage(
        reply,
        policiesPage(session, await layers(session), { notice: { kind: 'ok', text: 'Policy saved.' } }),
      )
    } catch (err) {
      const r = refusal(err)
      return sendPage(
        reply,
        policiesPage(session, await layers(session), { notice: r.notice, draft: { scope, key, text } }),
        r.status,
      )
    }
  })
}
