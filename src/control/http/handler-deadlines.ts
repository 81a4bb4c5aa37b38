import type { FastifyInstance, FastifyReply, onRequestHookHandler } from 'fastify'
import { ERRORS, WriteGateError } from '../../core/errors.js'

/** Routes that call an upstream: they may take as long as the upstream call may, and a little more. */
const UPSTREAM_CALLS = new Set([
  'POST /v1/execute',
  'POST /v1/agent/actions/:actionId/approve',
  'POST /portal/approvals/:actionId/approve',
])

/** Routes that read or stream a tenant's whole audit log (millions of receipts). */
const WHOLE_LOG = new Set([
  'GET /v1/receipts/export',
  'GET /v1/receipts/verify',
  'GET /portal/audit/export',
  // Verifies the whole log when asked to (`verify=1`).
  'GET /portal/audit',
  // The overview verifies the whole log on every visit.
  'GET /portal',
])

const WHOLE_LOG_MS = 3_600_000
/** What an upstream call's route adds to the call's own deadline: the decision and receipts around it. */
const AROUND_UPSTREAM_CALL_MS = 15_000

/** Every route given a longer deadline, as `METHOD /url` (a test holds each to an existing route). */
export const LONGER_DEADLINE_ROUTES: readonly string[] = [...UPSTREAM_CALLS, ...WHOLE_LOG]

export interface HandlerDeadlines {
  /** Every other route (settings `server.handlerTimeoutMs`). */
  defaultMs: number
  /** The upstream call's own bound (settings `execute.deadlineMs`). */
  upstreamCallMs: number
}

/** The deadline of one route, by its method and URL pattern. */
export function handlerDeadlineOf(method: string, url: string, d: HandlerDeadlines): number {
  const route = `${method} ${url}`
  if (UPSTREAM_CALLS.has(route)) return Math.max(d.defaultMs, d.upstreamCallMs + AROUND_UPSTREAM_CALL_MS)
  if (WHOLE_LOG.has(route)) return Math.max(d.defaultMs, WHOLE_LOG_MS)
  return d.defaultMs
}

/** How often in-flight requests are looked at: a deadline holds to within this. */
const SWEEP_EVERY_MS = 250

/**
 * A request that is not answered in time gets `503 unavailable` (reason `deadline`), instead
 * of waiting on a database that stopped answering for as long as the client will (postgres.js
 * has no per-query timeout). The handler is not stopped: what it started may still finish.
 *
 * One sweep a quarter second over the requests in flight, not fastify's `handlerTimeout`, which
 * gives every request an AbortController, a timer and listeners: `bench:cerbos` measured
 * `POST /v1/check` at 1.00–1.03× Cerbos with it, 1.19–1.26× with no deadline at all, and
 * 1.06–1.10× with this sweep (one machine, one hour; its runs drift by about 10%).
 * Streams that hijack the reply (the receipt streams) are answered already, so not bounded.
 */
export function installHandlerDeadlines(app: FastifyInstance, d: HandlerDeadlines): void {
  const inFlight = new Map<FastifyReply, number>()
  app.addHook('onRoute', (route) => {
    const methods = Array.isArray(route.method) ? route.method : [route.method]
    const deadlineMs = Math.max(...methods.map((m) => handlerDeadlineOf(m, route.url, d)))
    // The route's own first hook, with its deadline in hand: no per-request lookup of the route.
    const track: onRequestHookHandler = (_req, reply, done) => {
      inFlight.set(reply, Date.now() + deadlineMs)
      done()
    }
    const own =
      route.onRequest === undefined
        ? []
        : Array.isArray(route.onRequest)
          ? route.onRequest
          : [route.onRequest]
    route.onRequest = [track, ...own]
  })
  // Answered requests leave at the next sweep: no hook per response.
  const sweep = setInterval(() => {
    const now = Date.now()
    for (const [reply, at] of inFlight) {
      if (reply.sent || reply.raw.destroyed) inFlight.delete(reply)
      else if (now >= at) {
        inFlight.delete(reply)
        // Headers already out (a stream under way): nothing can be said any more; cut it.
        if (reply.raw.headersSent) reply.raw.destroy()
        else reply.send(new WriteGateError(ERRORS.unavailable, { reason: 'deadline' }))
      }
    }
  }, SWEEP_EVERY_MS)
  sweep.unref()
  app.addHook('onClose', (_app, done) => {
    clearInterval(sweep)
    done()
  })
}
