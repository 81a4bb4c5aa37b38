import type { FastifyInstance } from 'fastify'

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

/**
 * A request that is not answered in time gets `503 unavailable` (reason `deadline`) from
 * fastify's `handlerTimeout`, instead of waiting on a database that stopped answering for as
 * long as the client will (postgres.js has no per-query timeout). Streams that hijack the reply
 * (the receipt streams) are not bounded by it. Must be installed before any route.
 */
export function installHandlerDeadlines(app: FastifyInstance, d: HandlerDeadlines): void {
  app.addHook('onRoute', (route) => {
    const methods = Array.isArray(route.method) ? route.method : [route.method]
    const ms = Math.max(...methods.map((m) => handlerDeadlineOf(m, route.url, d)))
    if (ms !== d.defaultMs) route.handlerTimeout = ms
  })
}
