import { type Server as HttpServer, type IncomingMessage, type ServerResponse, STATUS_CODES } from 'node:http'
import { Server as HttpsServer } from 'node:https'
import type { Socket } from 'node:net'
import type { Duplex } from 'node:stream'
import type { TLSSocket } from 'node:tls'
import { ERRORS, type ErrorDef } from '../core/errors.js'
import type { Logger } from '../observability/logger.js'

/**
 * How long a connection we are closing stays open after its answer, reading and dropping what
 * the client still sends. Closing a socket with unread bytes makes the kernel send a reset,
 * which can destroy the answer before the client reads it.
 */
const LINGER_MS = 1000

/** Sockets whose client error was answered: Node reports the same parse error once per chunk. */
const answered = new WeakSet<Duplex>()

/**
 * Closes a connection that has sent nothing when its server's header timeout is up. Node starts
 * that timeout at a request's first byte, so a connection that never sends one was held for
 * ever, on every port: a peer could spend the process's descriptors on silent sockets (found in
 * review). One timer per connection, not per request; bytesRead counts what was decrypted on TLS.
 */
function closeIfSilent(socket: Socket | TLSSocket, ms: number): void {
  if (!(ms > 0)) return
  const timer = setTimeout(() => {
    if (socket.bytesRead === 0) socket.destroy()
  }, ms)
  timer.unref()
  socket.once('close', () => clearTimeout(timer))
}

/** A JSON HTTP/1.1 answer to write straight to a socket, where there is no response object. */
export function rawJsonAnswer(status: number, body: Record<string, unknown>): string {
  const text = JSON.stringify(body)
  return (
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\n` +
    'content-type: application/json\r\n' +
    `content-length: ${Buffer.byteLength(text)}\r\n` +
    'cache-control: no-store\r\n' +
    `connection: close\r\n\r\n${text}`
  )
}

/**
 * Writes a last answer and closes the connection without losing it: the write side ends at
 * once, what the client still sends is dropped, and the socket goes when the client closes or
 * after LINGER_MS. The caller must have an 'error' listener on the socket.
 */
export function endAndClose(socket: Duplex, answer: string): void {
  socket.end(answer)
  socket.resume()
  const timer = setTimeout(() => socket.destroy(), LINGER_MS)
  timer.unref()
  socket.once('close', () => clearTimeout(timer))
}

function clientErrorDef(code: string | undefined): ErrorDef {
  if (code === 'HPE_HEADER_OVERFLOW') return ERRORS.headersTooLarge
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT') return ERRORS.requestTimeout
  return ERRORS.invalidRequest
}

/**
 * Node's 'clientError': bytes that are no HTTP/1.1 request (a TLS or HTTP/2 preface, garbage,
 * conflicting lengths), headers over the size limit, a request too slow to arrive, or a socket
 * error outside a request. Answered in the registry's shape when there is still someone to
 * answer and no response is under way on the connection; logged at debug, as the client's doing.
 */
export function answerClientError(err: NodeJS.ErrnoException, socket: Duplex, logger: Logger): void {
  if (answered.has(socket)) return
  answered.add(socket)
  logger.debug({ code: err.code }, 'client error')
  // Node's own check: an answer already started on this connection must not be corrupted.
  const inFlight = (socket as { _httpMessage?: { headersSent?: boolean } | null })._httpMessage
  if (err.code === 'ECONNRESET' || !socket.writable || inFlight?.headersSent) {
    socket.destroy()
    return
  }
  const def = clientErrorDef(err.code)
  endAndClose(socket, rawJsonAnswer(def.status, { error: def.message, code: def.code }))
}

/** A registry refusal on a response object, closing the connection (what the client sent next is not read). */
function refuse(res: ServerResponse, def: ErrorDef, error: string = def.message): void {
  const text = JSON.stringify({ error, code: def.code })
  res.writeHead(def.status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
    'cache-control': 'no-store',
    connection: 'close',
  })
  res.end(text)
}

/**
 * Makes a node:http or node:https server safe from whatever a client does:
 *
 * - every connection (and, over TLS, every TLS socket) has an 'error' listener for its whole
 *   life. Node's own listener is removed when a socket is handed to a 'connect' or 'upgrade'
 *   handler, and an 'error' event with no listener kills the process;
 * - a request that cannot be parsed gets a JSON 400 (431 for oversize headers, 408 when too
 *   slow) and its connection is closed (`answerClientError`), unless the framework answers
 *   those itself (fastify: pass `clientErrors: false` and use its `clientErrorHandler`);
 * - a failed TLS handshake (plain HTTP or garbage on an HTTPS port) closes its socket;
 * - a connection that sends nothing is closed after the header timeout (`closeIfSilent`);
 * - what Node would answer with an empty body gets the registry's JSON: an HTTP/1.1 request
 *   without `Host` (400), an `Expect` other than `100-continue` (417), and a `CONNECT` on a port
 *   that does not serve tunnels (400; `connect: 'handled'` for gate-proxy, which does).
 *
 * Client failures are logged at debug: they are no failure of the server.
 */
export function guardServer<S extends HttpServer | HttpsServer>(
  server: S,
  logger: Logger,
  opts: { clientErrors?: boolean; connect?: 'refused' | 'handled' } = {},
): S {
  // Node's own Host check answers 400 with no body. It is answered here instead, before any
  // listener sees the request: 'request' and 'checkContinue' alike, whenever they were added.
  ;(server as { requireHostHeader?: boolean }).requireHostHeader = false
  const emit = server.emit.bind(server) as (event: string | symbol, ...args: unknown[]) => boolean
  server.emit = ((event: string | symbol, ...args: unknown[]) => {
    if (event === 'request' || event === 'checkContinue') {
      const req = args[0] as IncomingMessage
      if (req.headers.host === undefined && req.httpVersionMajor === 1 && req.httpVersionMinor === 1) {
        refuse(args[1] as ServerResponse, ERRORS.invalidRequest, 'an HTTP/1.1 request needs a Host header')
        return true
      }
    }
    return emit(event, ...args)
  }) as S['emit']
  server.on('checkExpectation', (_req: IncomingMessage, res: ServerResponse) =>
    refuse(res, ERRORS.expectationFailed),
  )
  if (opts.connect !== 'handled')
    server.on('connect', (_req: IncomingMessage, socket: Duplex) => {
      socket.on('error', () => {})
      endAndClose(
        socket,
        rawJsonAnswer(400, { error: 'CONNECT is not served on this port', code: ERRORS.invalidRequest.code }),
      )
    })
  const onSocketError = (err: NodeJS.ErrnoException) =>
    logger.debug({ code: err.code }, 'client connection failed')
  const tls = server instanceof HttpsServer
  server.on('connection', (socket: Socket) => {
    socket.on('error', onSocketError)
    // Over TLS, silence is judged after the handshake (which has its own timeout).
    if (!tls) closeIfSilent(socket, server.headersTimeout)
  })
  if (server instanceof HttpsServer) {
    server.on('secureConnection', (socket: TLSSocket) => {
      socket.on('error', onSocketError)
      closeIfSilent(socket, server.headersTimeout)
    })
    server.on('tlsClientError', (err: NodeJS.ErrnoException, socket: TLSSocket) => {
      logger.debug({ code: err.code }, 'TLS handshake failed')
      socket.destroy()
    })
  }
  if (opts.clientErrors !== false)
    server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) =>
      answerClientError(err, socket, logger),
    )
  return server
}
