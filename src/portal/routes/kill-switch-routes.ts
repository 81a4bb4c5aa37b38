import type { FastifyInstance } from 'fastify'
import { ERRORS, fail } from '../../core/errors.js'
import { grantRequest } from '../../sponsor/grant-request.js'
import type { RosterTargetBody } from '../../sponsor/sponsor-service.js'
import { killSwitchPage } from '../pages/kill-switch.js'
import { sendPage, sessionOf } from '../portal-http.js'
import type { PortalSession } from '../portal-sessions.js'
import { type PortalDeps, refusal, requirePage, signedForm } from './route-kit.js'

/**
 * The kill switch: revoke, reinstate, the roster, and one-write grants. The sponsor token is
 * asked on each use and never kept.
 */
export function killSwitchRoutes(app: FastifyInstance, deps: PortalDeps): void {
  const roster = async (session: PortalSession) =>
    (await deps.sponsor.revoked({ kind: 'sponsor', tenantId: session.caller.tenantId })).revoked

  app.get('/portal/kill-switch', { preHandler: requirePage }, async (req, reply) => {
    const session = sessionOf(req)
    return sendPage(reply, killSwitchPage(session, await roster(session)))
  })

  /** The sponsor token typed into the form, and it must be this tenant's. Never kept. */
  const sponsorOf = async (session: PortalSession, token: string | undefined) => {
    const sponsor = await deps.auth.sponsor(token?.trim())
    if (!sponsor || sponsor.tenantId !== session.caller.tenantId) fail(ERRORS.sponsorTokenInvalid)
    return sponsor
  }

  const rosterTarget = (form: Record<string, string>): RosterTargetBody => {
    const id = (form.targetId ?? '').trim()
    const reason = (form.reason ?? '').trim()
    const base = reason ? { reason: reason.slice(0, 500) } : {}
    if (form.targetKind === 'all') return { ...base, all: true }
    if (!id) fail(ERRORS.invalidRequest, undefined, { message: 'name the key or principal to revoke' })
    if (form.targetKind === 'key') return { ...base, keyId: id }
    if (form.targetKind === 'principal') return { ...base, principalId: id }
    return fail(ERRORS.invalidRequest, undefined, {
      message: 'choose a key, a principal or the whole tenant',
    })
  }

  /** The grant form as `POST /v1/grants` would take it: empty fields are absent. */
  const grantOf = (form: Record<string, string>) => {
    const opt = (k: string) => {
      const v = (form[k] ?? '').trim()
      return v === '' ? undefined : v
    }
    const ttl = opt('ttlSeconds')
    const parsed = grantRequest.safeParse({
      verb: opt('verb') ?? '',
      target: opt('target'),
      principalId: opt('principalId'),
      environment: opt('environment'),
      ttlSeconds: ttl === undefined ? undefined : /^\d{1,9}$/.test(ttl) ? Number(ttl) : Number.NaN,
      reason: opt('reason'),
    })
    if (!parsed.success) {
      const issues = parsed.error.issues.map((i) => ({ path: i.path.join('.'), message: i.message }))
      return fail(ERRORS.invalidRequest, { issues }, { message: 'the grant is not valid' })
    }
    return parsed.data
  }

  for (const change of ['revoke', 'reinstate'] as const) {
    app.post(`/portal/kill-switch/${change}`, async (req, reply) => {
      const { session, form } = signedForm(req)
      try {
        const sponsor = await sponsorOf(session, form.sponsorToken)
        const target = rosterTarget(form)
        const done =
          change === 'revoke'
            ? await deps.sponsor.revoke(sponsor, target)
            : await deps.sponsor.reinstate(sponsor, target)
        const what = target.all ? 'the whole tenant' : (target.keyId ?? target.principalId)
        return sendPage(
          reply,
          killSwitchPage(session, await roster(session), {
            kind: 'ok',
            text: `${change === 'revoke' ? 'Revoked' : 'Reinstated'} ${what} (receipt ${done.receiptId}).`,
          }),
        )
      } catch (err) {
        const r = refusal(err)
        return sendPage(reply, killSwitchPage(session, await roster(session), r.notice), r.status)
      }
    })
  }

  app.post('/portal/kill-switch/grant', async (req, reply) => {
    const { session, form } = signedForm(req)
    try {
      const sponsor = await sponsorOf(session, form.sponsorToken)
      const grant = await deps.sponsor.grant(sponsor, grantOf(form))
      const on = grant.target === null ? '' : ` on ${grant.target}`
      const until = new Date(grant.expiresAt * 1000).toISOString()
      return sendPage(
        reply,
        killSwitchPage(session, await roster(session), {
          kind: 'ok',
          text: `Granted ${grant.grantId}: one ${grant.verb} write${on}, until ${until}.`,
        }),
      )
    } catch (err) {
      const r = refusal(err)
      return sendPage(reply, killSwitchPage(session, await roster(session), r.notice), r.status)
    }
  })
}
