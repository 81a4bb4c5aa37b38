import type { FastifyReply, FastifyRequest, onRequestAsyncHookHandler } from 'fastify'
import type { Clock } from '../../core/clock.js'
import { ERRORS, WriteGateError } from '../../core/errors.js'
import { clientOf } from '../../node-http/client-address.js'
import type { RateLimitStore } from '../../store/ports/rate-limit.js'

/**
 * Per-client-IP limit. `req.ip` is the socket address unless the peer is a configured
 * trusted proxy (server.trustProxy), in which case X-Forwarded-For is honoured.
 */
export function limitPerIp(
  store: RateLimitStore,
  clock: Clock,
  name: string,
  limit: number,
  windowSeconds: number,
): onRequestAsyncHookHandler {
  return async (req: FastifyRequest, reply: FastifyReply) => {
    const verdict = await store.hit(`${name}:${clientOf(req.ip)}`, limit, windowSeconds, clock.nowMs())
    reply.header('RateLimit-Limit', String(limit))
    reply.header('RateLimit-Remaining', String(verdict.remaining))
    if (!verdict.allowed) {
      throw new WriteGateError(
        ERRORS.rateLimited,
        { limit, windowSeconds, retryAfter: verdict.retryAfterSeconds },
        { headers: { 'Retry-After': String(verdict.retryAfterSeconds) } },
      )
    }
  }
}
