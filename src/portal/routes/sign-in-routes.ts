import type { FastifyInstance } from 'fastify'
import { ERRORS, WriteGateError } from '../../core/errors.js'
import { randomBase62 } from '../../core/random.js'
import { signInPage } from '../pages/sign-in.js'
import {
  checkPreSessionCsrf,
  checkSignOutCsrf,
  cookie,
  formOf,
  PRE_SESSION_COOKIE,
  readCookie,
  SESSION_COOKIE,
  sendPage,
} from '../portal-http.js'
import { type PortalDeps, refusal } from './route-kit.js'

/** Sign-in (admin key + TOTP) and sign-out. */
export function signInRoutes(app: FastifyInstance, deps: PortalDeps): void {
  app.get('/portal/sign-in', async (req, reply) => {
    if (req.portal) return reply.redirect('/portal', 303)
    const pre = randomBase62(32)
    reply.header('set-cookie', [
      cookie(req, PRE_SESSION_COOKIE, pre, 3600),
      // Set by an earlier version for /portal only: sent first, it would shadow the new one for its hour.
      `${PRE_SESSION_COOKIE}=; Path=/portal; Max-Age=0; HttpOnly; SameSite=Strict`,
    ])
    return sendPage(reply, signInPage({ preCsrf: pre }))
  })

  app.post('/portal/sign-in', async (req, reply) => {
    const form = formOf(req)
    checkPreSessionCsrf(req, form)
    const pre = readCookie(req, PRE_SESSION_COOKIE) ?? ''
    try {
      const { token } = await deps.sessions.signIn({
        apiKey: form.apiKey ?? '',
        code: form.code ?? '',
        clientIp: req.ip,
      })
      reply.header('set-cookie', [
        cookie(req, SESSION_COOKIE, token, deps.sessionMaxSeconds),
        cookie(req, PRE_SESSION_COOKIE, '', 0),
      ])
      return reply.redirect('/portal', 303)
    } catch (err) {
      const r = refusal(err)
      if (err instanceof WriteGateError && err.headers) reply.headers(err.headers)
      return sendPage(reply, signInPage({ preCsrf: pre, notice: r.notice }), r.status)
    }
  })

  app.post('/portal/sign-out', async (req, reply) => {
    // Not signedForm: a session the sponsor's roster bars (or one expired) is refused as a session,
    // but signing it out must still end it, or a reinstate would bring back a session its user
    // ended (found in review). The form's token is checked against the cookie itself.
    const token = readCookie(req, SESSION_COOKIE)
    if (!token) throw new WriteGateError(ERRORS.portalSessionRequired)
    checkSignOutCsrf(req, token, formOf(req))
    await deps.sessions.signOut(token)
    reply.header('set-cookie', cookie(req, SESSION_COOKIE, '', 0))
    return reply.redirect('/portal/sign-in', 303)
  })
}
