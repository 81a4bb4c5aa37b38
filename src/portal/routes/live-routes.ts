import type { FastifyInstance } from 'fastify'
import { RECEIPT_STREAM_HEADERS, type ReceiptStream, startReceiptStream } from '../../audit/receipt-stream.js'
import { ERRORS } from '../../core/errors.js'
import { livePage } from '../pages/live.js'
import { readCookie, SESSION_COOKIE, sendPage, sessionOf } from '../portal-http.js'
import { type PortalDeps, requirePage } from './route-kit.js'

/** Live decisions: the page and its receipt stream, which ends with the session. */
export function liveRoutes(app: FastifyInstance, deps: PortalDeps): void {
  const streams = new Set<ReceiptStream>()
  app.addHook('preClose', async () => {
    await Promise.all(
      [...streams].map((s) => {
        s.close()
        return s.done
      }),
    )
  })

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
    const token = readCookie(req, SESSION_COOKIE)
    if (req.method === 'HEAD') {
      reply.hijack()
      reply.raw.writeHead(200, RECEIPT_STREAM_HEADERS)
      reply.raw.end()
      return
    }
    // Counted with the API's streams (found in review: this one was not, and one session opened 40).
    const slot = deps.streamSlots.take(session.caller.tenantId)
    if ('limit' in slot) {
      const def = ERRORS.streamLimitReached
      return reply.code(def.status).send({ error: def.message, code: def.code, limit: slot.limit })
    }
    reply.hijack()
    const stream = startReceiptStream(reply.raw, session.caller.tenantId, cursor, {
      reader: deps.reader,
      wakeups: deps.wakeups,
      keepaliveMs: deps.streamKeepaliveMs,
      logger: req.log,
      // The stream ends with the session (signed out, expired, idle, its key dead); watching
      // is not use, so an unattended Live page lets the session idle out.
      stillAuthorized: async () => (await deps.sessions.resolve(token, { touch: false })) !== null,
    })
    streams.add(stream)
    void stream.done.then(() => {
      streams.delete(stream)
      slot.release()
    })
  })
}
