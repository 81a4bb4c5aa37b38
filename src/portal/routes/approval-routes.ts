import type { FastifyInstance, FastifyRequest } from 'fastify'
import { ERRORS, fail, WriteGateError } from '../../core/errors.js'
import { approvalPage, approvalResultPage, approvalsPage } from '../pages/approvals.js'
import { paramsDiff } from '../params-diff.js'
import { sendPage, sessionOf } from '../portal-http.js'
import { type PortalDeps, portalJson, refusal, requirePage, signedForm } from './route-kit.js'

/** Pending actions: read, preview edits, approve with TOTP, deny. */
export function approvalRoutes(app: FastifyInstance, deps: PortalDeps): void {
  app.get('/portal/approvals', { preHandler: requirePage }, async (req, reply) => {
    const session = sessionOf(req)
    const page = await deps.approvals.list(session.caller, { limit: 200 })
    return sendPage(reply, approvalsPage(session, page.actions))
  })

  const actionId = (req: FastifyRequest) => {
    const id = (req.params as { actionId: string }).actionId
    if (id.length > 128) fail(ERRORS.actionNotFound)
    return id
  }

  app.get('/portal/approvals/:actionId', { preHandler: requirePage }, async (req, reply) => {
    const session = sessionOf(req)
    return sendPage(reply, approvalPage(session, await deps.approvals.get(session.caller, actionId(req))))
  })

  /** The params edits of an approval form: a JSON object, or nothing. */
  const editsOf = (text: string | undefined): Record<string, unknown> | undefined => {
    if (!text || text.trim() === '') return undefined
    const v = portalJson(text, 'parameter edits')
    if (typeof v !== 'object' || v === null || Array.isArray(v))
      fail(ERRORS.invalidRequest, undefined, { message: 'parameter edits must be a JSON object' })
    return v as Record<string, unknown>
  }

  app.post('/portal/approvals/:actionId/preview', async (req, reply) => {
    const { session, form } = signedForm(req)
    const action = await deps.approvals.get(session.caller, actionId(req))
    try {
      const edits = editsOf(form.params) ?? {}
      return sendPage(
        reply,
        approvalPage(session, action, { paramsText: form.params, diff: paramsDiff(action.params, edits) }),
      )
    } catch (err) {
      const r = refusal(err)
      return sendPage(
        reply,
        approvalPage(session, action, { paramsText: form.params, notice: r.notice }),
        r.status,
      )
    }
  })

  app.post('/portal/approvals/:actionId/approve', async (req, reply) => {
    const { session, form } = signedForm(req)
    const id = actionId(req)
    const action = await deps.approvals.get(session.caller, id)
    try {
      const params = action.request === null ? editsOf(form.params) : undefined
      const code = form.totpCode?.trim()
      const out = await deps.approvals.approve(session.caller, id, {
        ...(code ? { totpCode: code } : {}),
        ...(params ? { params } : {}),
      })
      return sendPage(reply, approvalResultPage(session, id, out), out.type === 'upstream_error' ? 502 : 200)
    } catch (err) {
      const r = refusal(err)
      if (err instanceof WriteGateError && err.headers) reply.headers(err.headers)
      return sendPage(
        reply,
        approvalPage(session, action, { paramsText: form.params, notice: r.notice }),
        r.status,
      )
    }
  })

  app.post('/portal/approvals/:actionId/dismiss', async (req, reply) => {
    const { session, form } = signedForm(req)
    const id = actionId(req)
    const reason = (form.reason ?? '').trim().slice(0, 500)
    const receipt = await deps.approvals.dismiss(session.caller, id, reason || null)
    const page = await deps.approvals.list(session.caller, { limit: 200 })
    return sendPage(
      reply,
      approvalsPage(session, page.actions, {
        kind: 'ok',
        text: `Denied ${id}: it will never be written (receipt ${receipt.receiptId}).`,
      }),
    )
  })
}
