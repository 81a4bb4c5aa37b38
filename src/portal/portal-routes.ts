import type { KeyObject } from 'node:crypto'
import { readFileSync } from 'node:fs'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { ApprovalService } from '../actions/approval-service.js'
import type { Checkpointer } from '../audit/checkpointer.js'
import { exportLogStream } from '../audit/log-export.js'
import { verifyStoredLog } from '../audit/log-verifier.js'
import { RECEIPT_STREAM_HEADERS, type ReceiptStream, startReceiptStream } from '../audit/receipt-stream.js'
import type { ReceiptWakeups } from '../audit/receipt-wakeups.js'
import type { Clock } from '../core/clock.js'
import { ERRORS, fail, WriteGateError } from '../core/errors.js'
import { randomBase62 } from '../core/random.js'
import { ENVIRONMENTS } from '../core/verbs.js'
import type { Authenticator } from '../identity/authenticator.js'
import type { PrincipalService } from '../identity/principal-service.js'
import type { PolicyService } from '../policy/policy-service.js'
import type { PolicyObject } from '../policy/policy-view.js'
import type { RosterTargetBody, SponsorService } from '../sponsor/sponsor-service.js'
import type { CheckpointStore } from '../store/ports/checkpoints.js'
import type { SystemOfRecord } from '../store/ports/index.js'
import type { ReceiptReader } from '../store/ports/receipt-reader.js'
import type { Notice } from './layout.js'
import { overviewData } from './overview-data.js'
import { approvalPage, approvalResultPage, approvalsPage } from './pages/approvals.js'
import { auditPage, type ReceiptQuery, receiptPage, type VerifyView } from './pages/audit.js'
import { killSwitchPage } from './pages/kill-switch.js'
import { livePage } from './pages/live.js'
import { overviewPage } from './pages/overview.js'
import { policiesPage } from './pages/policies.js'
import { principalsPage } from './pages/principals.js'
import { signInPage } from './pages/sign-in.js'
import { paramsDiff } from './params-diff.js'
import {
  checkCsrf,
  checkPreSessionCsrf,
  cookie,
  cookiesOf,
  formOf,
  installPortalHttp,
  PRE_SESSION_COOKIE,
  SESSION_COOKIE,
  sendPage,
  sessionOf,
} from './portal-http.js'
import type { PortalSession, PortalSessions } from './portal-sessions.js'
import { searchReceipts } from './receipt-search.js'

export interface PortalDeps {
  sessions: PortalSessions
  auth: Authenticator
  sor: SystemOfRecord
  approvals: ApprovalService
  sponsor: SponsorService
  policies: PolicyService
  principals: PrincipalService
  reader: ReceiptReader
  checkpoints: CheckpointStore
  checkpointer: Checkpointer
  wakeups: ReceiptWakeups
  publicKey: KeyObject
  clock: Clock
  streamKeepaliveMs: number
  sessionMaxSeconds: number
}

const ASSETS = {
  'portal.css': { type: 'text/css; charset=utf-8', body: readAsset('portal.css') },
  'portal.js': { type: 'text/javascript; charset=utf-8', body: readAsset('portal.js') },
} as const

function readAsset(name: string): string {
  return readFileSync(new URL(`./assets/${name}`, import.meta.url), 'utf8')
}

/** A page for a signed-in human; without a session, the browser goes to sign-in. */
async function requirePage(req: FastifyRequest, reply: FastifyReply): Promise<void> {
  if (!req.portal) await reply.redirect('/portal/sign-in', 303)
}

/** A state change: a live session, and a form of one of its pages. */
function signedForm(req: FastifyRequest): { session: PortalSession; form: Record<string, string> } {
  const session = sessionOf(req)
  const form = formOf(req)
  checkCsrf(req, session, form)
  return { session, form }
}

/** The registry's words for a refused change, shown on the page it came from. */
function refusal(err: unknown): { notice: Notice; status: number } {
  if (!(err instanceof WriteGateError)) throw err
  const issues = (err.detail?.issues as { path?: string; message?: string }[] | undefined) ?? []
  const extra = issues.map((i) => `${i.path ? `${i.path}: ` : ''}${i.message ?? ''}`).join('; ')
  const verbs = Array.isArray(err.detail?.verbs) ? ` (${(err.detail.verbs as string[]).join(', ')})` : ''
  return {
    notice: { kind: 'error', text: `${err.message}${extra ? `: ${extra}` : ''}${verbs} [${err.def.code}]` },
    status: err.def.status,
  }
}

export function portalRoutes(deps: PortalDeps) {
  return async (app: FastifyInstance): Promise<void> => {
    installPortalHttp(app, deps.sessions)
    const streams = new Set<ReceiptStream>()
    app.addHook('preClose', async () => {
      await Promise.all(
        [...streams].map((s) => {
          s.close()
          return s.done
        }),
      )
    })

    app.get('/portal/assets/:name', async (req, reply) => {
      const asset = ASSETS[(req.params as { name: string }).name as keyof typeof ASSETS]
      if (!asset) fail(ERRORS.notFound)
      return reply.type(asset.type).send(asset.body)
    })

    // ---- sign-in and out
    app.get('/portal/sign-in', async (req, reply) => {
      if (req.portal) return reply.redirect('/portal', 303)
      const pre = randomBase62(32)
      reply.header(
        'set-cookie',
        cookie(req, PRE_SESSION_COOKIE, pre, { path: '/portal', maxAgeSeconds: 3600 }),
      )
      return sendPage(reply, signInPage({ preCsrf: pre }))
    })

    app.post('/portal/sign-in', async (req, reply) => {
      const form = formOf(req)
      checkPreSessionCsrf(req, form)
      const pre = cookiesOf(req).get(PRE_SESSION_COOKIE) ?? ''
      try {
        const { token } = await deps.sessions.signIn({
          apiKey: form.apiKey ?? '',
          code: form.code ?? '',
          clientIp: req.ip,
        })
        reply.header('set-cookie', [
          cookie(req, SESSION_COOKIE, token, { path: '/', maxAgeSeconds: deps.sessionMaxSeconds }),
          cookie(req, PRE_SESSION_COOKIE, '', { path: '/portal', maxAgeSeconds: 0 }),
        ])
        return reply.redirect('/portal', 303)
      } catch (err) {
        const r = refusal(err)
        if (err instanceof WriteGateError && err.headers) reply.headers(err.headers)
        return sendPage(reply, signInPage({ preCsrf: pre, notice: r.notice }), r.status)
      }
    })

    app.post('/portal/sign-out', async (req, reply) => {
      signedForm(req)
      await deps.sessions.signOut(cookiesOf(req).get(SESSION_COOKIE) ?? '')
      reply.header('set-cookie', cookie(req, SESSION_COOKIE, '', { path: '/', maxAgeSeconds: 0 }))
      return reply.redirect('/portal/sign-in', 303)
    })

    // ---- overview
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
      )
      return sendPage(reply, overviewPage(session, data))
    })

    // ---- live decisions
    app.get('/portal/live', { preHandler: requirePage }, async (req, reply) => {
      const session = sessionOf(req)
      const head = await deps.reader.head(session.caller.tenantId)
      return sendPage(reply, livePage(session, Math.max(0, head.seq - 50)))
    })

    app.get('/portal/live/stream', async (req, reply) => {
      const session = sessionOf(req)
      const q = req.query as { since?: string }
      const last = req.headers['last-event-id']
      const raw = typeof last === 'string' ? last : q.since
      const cursor = raw !== undefined && /^\d{1,15}$/.test(raw) ? Number(raw) : 0
      const token = cookiesOf(req).get(SESSION_COOKIE)
      reply.hijack()
      if (req.method === 'HEAD') {
        reply.raw.writeHead(200, RECEIPT_STREAM_HEADERS)
        reply.raw.end()
        return
      }
      const stream = startReceiptStream(reply.raw, session.caller.tenantId, cursor, {
        reader: deps.reader,
        wakeups: deps.wakeups,
        keepaliveMs: deps.streamKeepaliveMs,
        logger: req.log,
        // The stream ends with the session (signed out, expired, its key dead).
        stillAuthorized: async () => (await deps.sessions.resolve(token)) !== null,
      })
      streams.add(stream)
      void stream.done.then(() => streams.delete(stream))
    })

    // ---- approvals
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
      let v: unknown
      try {
        v = JSON.parse(text)
      } catch {
        fail(ERRORS.invalidRequest, undefined, { message: 'parameter edits are not valid JSON' })
      }
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
        return sendPage(
          reply,
          approvalResultPage(session, id, out),
          out.type === 'upstream_error' ? 502 : 200,
        )
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

    // ---- kill switch
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

    // ---- policies
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
        let body: unknown
        try {
          body = JSON.parse(text)
        } catch {
          fail(ERRORS.invalidRequest, undefined, { message: 'the policy is not valid JSON' })
        }
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

    // ---- principals and keys
    const principalRows = async (session: PortalSession) => {
      const list = await deps.principals.list(session.caller, false)
      return Promise.all(
        list.map(async (principal) => ({
          principal,
          keys: await deps.sor.stores.keys.liveKeysOfPrincipal(
            session.caller.tenantId,
            principal.principalId,
          ),
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

    // ---- audit
    app.get('/portal/audit', { preHandler: requirePage }, async (req, reply) => {
      const session = sessionOf(req)
      const raw = req.query as Record<string, unknown>
      const field = (k: string) =>
        typeof raw[k] === 'string' && raw[k] !== '' ? (raw[k] as string).slice(0, 200) : undefined
      const query: ReceiptQuery = {
        kind: field('kind'),
        decision: field('decision'),
        verb: field('verb'),
        principal: field('principal'),
        system: field('system'),
        text: field('text'),
      }
      const tenantId = session.caller.tenantId
      const found = await searchReceipts({ stores: deps.sor.stores, reader: deps.reader }, tenantId, query)
      let verify: VerifyView | undefined
      if (field('verify') === '1') {
        const v = await verifyStoredLog(
          { reader: deps.reader, checkpoints: deps.checkpoints, publicKey: deps.publicKey },
          tenantId,
          {},
        )
        verify = {
          valid: v.valid,
          checked: v.checked,
          headSeq: v.headSeq,
          firstInvalidSeq: v.firstInvalidSeq,
          reason: v.reason,
        }
      }
      return sendPage(reply, auditPage(session, { query, ...found, ...(verify ? { verify } : {}) }))
    })

    app.get('/portal/audit/receipts/:receiptId', { preHandler: requirePage }, async (req, reply) => {
      const session = sessionOf(req)
      const id = (req.params as { receiptId: string }).receiptId
      const receipt =
        id.length <= 128 ? await deps.sor.stores.receipts.get(session.caller.tenantId, id) : null
      if (!receipt) fail(ERRORS.receiptNotFound)
      return sendPage(reply, receiptPage(session, receipt))
    })

    app.get('/portal/audit/export', async (req, reply) => {
      const session = sessionOf(req)
      const tenantId = session.caller.tenantId
      const checkpoint = await deps.checkpointer.checkpointTenant(tenantId)
      reply
        .header('content-type', 'application/x-ndjson; charset=utf-8')
        .header('content-disposition', `attachment; filename="writegate-audit-${tenantId}.jsonl"`)
      return reply.send(exportLogStream(deps.reader, tenantId, checkpoint))
    })
  }
}
