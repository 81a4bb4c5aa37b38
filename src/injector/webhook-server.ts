import type { IncomingMessage, ServerResponse } from 'node:http'
import { createServer, type Server } from 'node:https'
import type { AddressInfo } from 'node:net'
import secureJson from 'secure-json-parse'
import { ERRORS, type ErrorDef } from '../core/errors.js'
import { guardServer } from '../node-http/guarded-server.js'
import { BodyTooLarge, readBody } from '../node-http/read-body.js'
import type { Logger } from '../observability/logger.js'
import type { ReviewAnswer } from './review-handler.js'

/** The API server caps request bodies at 3 MiB; a review is never larger. */
export const MAX_REVIEW_BYTES = 3 * 1024 * 1024
export const MUTATE_PATH = '/mutate'

export interface TlsMaterial {
  cert: string | Buffer
  key: string | Buffer
}

export interface WebhookServerDeps {
  tls: TlsMaterial
  logger: Logger
  review(body: unknown): ReviewAnswer
}

export interface WebhookServer {
  readonly server: Server
  listen(port: number, host: string): Promise<AddressInfo>
  /** Swaps the serving certificate (a renewal) without dropping connections. */
  setTls(tls: TlsMaterial): void
  close(): Promise<void>
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body)
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) })
  res.end(text)
}

function sendError(res: ServerResponse, def: ErrorDef, message = def.message): void {
  sendJson(res, def.status, { error: message, code: def.code })
}

/**
 * The admission webhook over HTTPS (node:https): POST /mutate takes an AdmissionReview,
 * GET /healthz answers liveness. Every error is JSON, and no request can take the server
 * down: a failure in one review is a 500 for that review alone, a client's failure is its own.
 */
export function createWebhookServer(deps: WebhookServerDeps): WebhookServer {
  const { logger } = deps

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '/').split('?')[0]
    if (path === '/healthz' && (req.method === 'GET' || req.method === 'HEAD'))
      return sendJson(res, 200, { status: 'ok' })
    if (path !== MUTATE_PATH || req.method !== 'POST') return sendError(res, ERRORS.notFound)
    const type = String(req.headers['content-type'] ?? '')
    if (!/^application\/json\s*(;.*)?$/i.test(type)) return sendError(res, ERRORS.unsupportedMediaType)

    let raw: Buffer
    try {
      raw = await readBody(req, MAX_REVIEW_BYTES)
    } catch (err) {
      if (err instanceof BodyTooLarge) {
        res.setHeader('connection', 'close')
        return sendError(res, ERRORS.payloadTooLarge, 'AdmissionReview over 3 MiB')
      }
      // The client went away mid-body: no one to answer, and no failure of the webhook.
      logger.debug(
        { code: (err as NodeJS.ErrnoException).code },
        'client went away before its review was read',
      )
      res.destroy()
      return
    }
    let body: unknown
    try {
      body = secureJson.parse(raw.toString('utf8'), undefined, {
        protoAction: 'error',
        constructorAction: 'error',
      })
    } catch {
      return sendError(res, ERRORS.invalidJson)
    }
    const answer = deps.review(body)
    const s = answer.summary
    if (s.outcome === 'invalid') logger.warn({ review: s }, 'malformed admission review')
    else logger.info({ review: s }, `admission review ${s.outcome}`)
    sendJson(res, answer.status, answer.body)
  }

  const server = createServer(
    // A handshake stalled for 10 s is no API server's (as headersTimeout below, for the headers).
    { cert: deps.tls.cert, key: deps.tls.key, minVersion: 'TLSv1.2', handshakeTimeout: 10_000 },
    (req, res) => {
      handle(req, res).catch((err: unknown) => {
        logger.error({ err }, 'admission review failed')
        if (!res.headersSent) sendError(res, ERRORS.internal)
        else res.destroy()
      })
    },
  )
  // The API server times a webhook out after at most 30 s; a slower client is not one.
  server.requestTimeout = 30_000
  server.headersTimeout = 10_000
  // Handshake failures, resets and unparseable requests close their connection (debug logs).
  guardServer(server, logger)

  return {
    server,
    listen(port, host) {
      return new Promise((resolve, reject) => {
        server.once('error', reject)
        server.listen(port, host, () => {
          server.off('error', reject)
          resolve(server.address() as AddressInfo)
        })
      })
    },
    setTls(tls) {
      server.setSecureContext({ cert: tls.cert, key: tls.key, minVersion: 'TLSv1.2' })
    },
    close() {
      return new Promise((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
      })
    },
  }
}
