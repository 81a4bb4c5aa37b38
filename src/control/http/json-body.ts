import type { FastifyInstance } from 'fastify'
import secureJson from 'secure-json-parse'
import { ERRORS, WriteGateError } from '../../core/errors.js'

/**
 * JSON bodies, parsed with prototype-poisoning protection. An empty body is accepted
 * as "no body", so clients that always send Content-Type: application/json can call
 * the endpoints that take none.
 */
export function installJsonBodyParser(app: FastifyInstance, bodyLimit: number): void {
  app.removeContentTypeParser(['application/json'])
  app.addContentTypeParser(
    /^application\/([\w.+-]+\+)?json(\s*;.*)?$/i,
    { parseAs: 'string', bodyLimit },
    (_req, body, done) => {
      const text = typeof body === 'string' ? body : body.toString('utf8')
      if (text.trim() === '') return done(null, undefined)
      try {
        done(null, secureJson.parse(text, undefined, { protoAction: 'error', constructorAction: 'error' }))
      } catch {
        done(new WriteGateError(ERRORS.invalidJson), undefined)
      }
    },
  )
}
