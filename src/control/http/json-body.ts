import type { FastifyInstance } from 'fastify'
import secureJson from 'secure-json-parse'
import { ERRORS, WriteGateError } from '../../core/errors.js'
import { isStorableString, unstorableJson } from './storable-json.js'

/**
 * JSON bodies, parsed with prototype-poisoning protection. An empty body is accepted
 * as "no body", so clients that always send Content-Type: application/json can call
 * the endpoints that take none. JSON is the only parser: a body of any other type
 * (text/plain included, which fastify parses by default) is 415 unsupported_media_type.
 */
export function installJsonBodyParser(app: FastifyInstance, bodyLimit: number): void {
  app.removeAllContentTypeParsers()
  app.addContentTypeParser(
    /^application\/([\w.+-]+\+)?json(\s*;.*)?$/i,
    { parseAs: 'string', bodyLimit },
    (_req, body, done) => {
      const text = typeof body === 'string' ? body : body.toString('utf8')
      if (text.trim() === '') return done(null, undefined)
      let value: unknown
      try {
        value = secureJson.parse(text, undefined, { protoAction: 'error', constructorAction: 'error' })
      } catch {
        return done(new WriteGateError(ERRORS.invalidJson), undefined)
      }
      const problem = unstorableJson(value)
      if (problem)
        return done(
          new WriteGateError(ERRORS.invalidRequest, undefined, { message: `invalid body: ${problem}` }),
          undefined,
        )
      done(null, value)
    },
  )
}

/** A URL holding NUL (or an unpaired surrogate once decoded) names nothing that can be stored or looked up. */
export function installUrlGuard(app: FastifyInstance): void {
  app.addHook('onRequest', async (req) => {
    const url = req.url
    let decoded: string
    try {
      decoded = decodeURIComponent(url)
    } catch {
      throw new WriteGateError(ERRORS.invalidRequest, undefined, {
        message: 'invalid request: malformed percent-encoding in the URL',
      })
    }
    if (!isStorableString(decoded))
      throw new WriteGateError(ERRORS.invalidRequest, undefined, {
        message: 'invalid request: the URL holds a NUL character',
      })
  })
}
