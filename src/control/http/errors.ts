import type { FastifyError, FastifyInstance } from 'fastify'
import { ERRORS, type ErrorDef, WriteGateError } from '../../core/errors.js'
import { ClientLeft } from '../../node-http/client-leaves.js'
import { serviceUnavailable } from '../../node-http/service-unavailable.js'

interface ValidationIssue {
  path: string
  message: string
}

/** Fastify's own error codes that are the client's fault, mapped onto the registry. */
const FASTIFY_CODES: Record<string, ErrorDef> = {
  FST_ERR_CTP_INVALID_JSON_BODY: ERRORS.invalidJson,
  FST_ERR_CTP_EMPTY_JSON_BODY: ERRORS.invalidJson,
  FST_ERR_CTP_BODY_TOO_LARGE: ERRORS.payloadTooLarge,
  FST_ERR_CTP_INVALID_MEDIA_TYPE: ERRORS.unsupportedMediaType,
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: ERRORS.invalidRequest,
  FST_ERR_CTP_INVALID_TYPE: ERRORS.unsupportedMediaType,
}

function validationIssues(err: FastifyError): ValidationIssue[] {
  const v = err.validation as unknown as
    | { instancePath?: string; message?: string; params?: { issue?: { path?: unknown[] } } }[]
    | undefined
  if (!Array.isArray(v)) return []
  return v.map((e) => {
    const path = Array.isArray(e.params?.issue?.path)
      ? e.params.issue.path.join('.')
      : (e.instancePath ?? '').replace(/^\//, '').replace(/\//g, '.')
    return { path, message: e.message ?? 'invalid' }
  })
}

/**
 * Every error leaves as `{error, code, ...detail}`. Client errors are never logged as
 * errors (a healthy service logs none); anything unexpected is a 500 and is logged.
 */
export function installErrorHandling(app: FastifyInstance): void {
  app.setNotFoundHandler((_req, reply) => {
    reply.code(404).send({ error: ERRORS.notFound.message, code: ERRORS.notFound.code })
  })

  app.setErrorHandler((err: FastifyError, req, reply) => {
    // No one is there to read an answer: none is written, and nothing went wrong.
    if ((err as Error) instanceof ClientLeft) return reply.hijack()
    if (err instanceof WriteGateError) {
      if (err.headers) reply.headers(err.headers)
      // A refusal the service chose while a dependency is away (503: gate_unavailable,
      // publish_pending, a deadline) is expected in an outage: one warning with its code, no
      // stack trace per request (found in review). Anything else at 5xx is a failure.
      if (err.status === 503)
        req.log.warn({ code: err.def.code, reason: err.detail?.reason }, 'request refused: unavailable')
      else if (err.status >= 500) req.log.error({ err }, 'request failed')
      return reply.code(err.status).send(err.toBody())
    }
    if (err.validation && err.validationContext === 'params') {
      // A path that cannot name a resource (an empty or oversized id) names no route.
      return reply.code(404).send({ error: ERRORS.notFound.message, code: ERRORS.notFound.code })
    }
    if (err.validation) {
      const issues = validationIssues(err)
      const where = err.validationContext ?? 'body'
      const first = issues[0]
      const message = first
        ? `invalid ${where}: ${first.path ? `${first.path}: ` : ''}${first.message}`
        : `invalid ${where}`
      return reply.code(400).send({ error: message, code: ERRORS.invalidRequest.code, issues })
    }
    // A store away (a failover, a restart, a dropped connection): the service's outage, not a bug.
    // (A request past its deadline is answered by handler-deadlines.ts as a WriteGateError.)
    const outage = serviceUnavailable(err)
    if (outage) {
      req.log.error(
        { err: { message: err.message, code: err.code }, ...outage.detail },
        'request failed: unavailable',
      )
      return reply.code(outage.status).send(outage.toBody())
    }
    const mapped = err.code ? FASTIFY_CODES[err.code] : undefined
    if (mapped) return reply.code(mapped.status).send({ error: mapped.message, code: mapped.code })
    if (err instanceof SyntaxError) {
      return reply.code(400).send({ error: ERRORS.invalidJson.message, code: ERRORS.invalidJson.code })
    }
    const status = typeof err.statusCode === 'number' ? err.statusCode : 500
    if (status >= 400 && status < 500) {
      return reply.code(status).send({ error: err.message, code: ERRORS.invalidRequest.code })
    }
    req.log.error({ err }, 'unhandled error')
    return reply.code(500).send({ error: ERRORS.internal.message, code: ERRORS.internal.code })
  })
}
