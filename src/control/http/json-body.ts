import type { FastifyInstance } from 'fastify'
import secureJson from 'secure-json-parse'
import { ERRORS, WriteGateError } from '../../core/errors.js'
import { isStorableString, unstorableJson } from '../../core/storable-json.js'

/** JSON between systems is UTF-8 (RFC 8259 §8.1); bytes that are not are refused, never replaced. */
const UTF8 = new TextDecoder('utf-8', { fatal: true })
const CHARSET = /;\s*charset\s*=\s*"?([^";\s]+)/i

/**
 * JSON bodies, parsed with prototype-poisoning protection. An empty body is accepted
 * as "no body", so clients that always send Content-Type: application/json can call
 * the endpoints that take none. JSON is the only parser: a body of any other type
 * (text/plain included, which fastify parses by default) is 415 unsupported_media_type,
 * as is a charset other than UTF-8 or a content coding (neither is decoded: a receipt must
 * record the bytes the client meant). Bytes that are not UTF-8 are 400 invalid_json: decoded
 * leniently, `café` in Latin-1 and other strings would collapse into one audited target.
 */
export function installJsonBodyParser(app: FastifyInstance, bodyLimit: number): void {
  app.removeAllContentTypeParsers()
  app.addContentTypeParser(
    /^application\/([\w.+-]+\+)?json(\s*;.*)?$/i,
    { parseAs: 'buffer', bodyLimit },
    (req, body, done) => {
      const charset = CHARSET.exec(req.headers['content-type'] ?? '')?.[1]?.toLowerCase()
      if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8')
        return done(
          new WriteGateError(ERRORS.unsupportedMediaType, undefined, {
            message: `JSON bodies are UTF-8, not ${charset}`,
          }),
          undefined,
        )
      const coding = req.headers['content-encoding']
      if (coding !== undefined && coding.trim().toLowerCase() !== 'identity')
        return done(
          new WriteGateError(ERRORS.unsupportedMediaType, undefined, {
            message: 'bodies are sent without a content coding',
          }),
          undefined,
        )
      let text: string
      try {
        text = UTF8.decode(body as Buffer)
      } catch {
        return done(
          new WriteGateError(ERRORS.invalidJson, undefined, { message: 'malformed JSON body: not UTF-8' }),
          undefined,
        )
      }
      if (text.trim() === '') return done(null, undefined)
      const read = readClientJson(text)
      if (read.ok) return done(null, read.value)
      return done(
        read.problem === null
          ? new WriteGateError(ERRORS.invalidJson)
          : new WriteGateError(ERRORS.invalidRequest, undefined, {
              message: `invalid body: ${read.problem}`,
            }),
        undefined,
      )
    },
  )
}

/**
 * JSON a client wrote, as every edge reads it (API bodies, the portal's JSON fields): parsed
 * with prototype-poisoning protection, then refused if it holds what storage cannot (NUL,
 * unpaired surrogates, non-finite numbers, nesting past MAX_JSON_DEPTH). `problem` is null when
 * the text is not JSON at all.
 */
export function readClientJson(
  text: string,
): { ok: true; value: unknown } | { ok: false; problem: string | null } {
  let value: unknown
  try {
    value = secureJson.parse(text, undefined, { protoAction: 'error', constructorAction: 'error' })
  } catch {
    return { ok: false, problem: null }
  }
  const problem = unstorableJson(value)
  return problem === null ? { ok: true, value } : { ok: false, problem }
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
