import type { IncomingHttpHeaders, IncomingMessage } from 'node:http'

/**
 * How a forwarded request's body is delimited upstream, decided by the proxy rather than left to
 * http-proxy and Node. A body that goes out unframed is read by the upstream as a request of its
 * own, on a kept-alive connection the proxy shares with every agent: a write smuggled past the
 * gate, with the injected credential and no receipt.
 *
 * - A body read whole (to decide on it, or to stage it) goes with its own length, whatever
 *   framing the agent sent it in (Node's parser has taken the chunks apart).
 * - A body streamed as it arrives keeps the agent's framing: its Content-Length, or its
 *   Transfer-Encoding, which Node then re-chunks for the upstream.
 */
export function frameBody(headers: IncomingHttpHeaders, read: Buffer | undefined): void {
  if (!read) return
  headers['content-length'] = String(read.length)
  // Rare (a chunked body read whole): deleted, as Node refuses an outgoing header set to undefined.
  if (headers['transfer-encoding'] !== undefined) delete headers['transfer-encoding']
}

/** The http-proxy pass that `keepChunked` is run as, before the one that sends the request. */
export const SENDING_PASS = 'stream'

/**
 * Run as an http-proxy pass just before it sends the request: http-proxy's own `deleteLength`
 * pass gives a DELETE or OPTIONS without a Content-Length `content-length: 0` and drops its
 * Transfer-Encoding, and the chunked body it then pipes would follow with no framing at all.
 * A request whose body is still chunked gets its Transfer-Encoding back, and no length.
 */
export function keepChunked(req: IncomingMessage): void {
  const chunked = (req as IncomingMessage & { wgChunked?: string }).wgChunked
  if (chunked === undefined) return
  req.headers['transfer-encoding'] = chunked
  if (req.headers['content-length'] !== undefined) delete req.headers['content-length']
}

/**
 * Why a request's framing cannot be forwarded, or null. Node's parser reads a body as chunked
 * only when the last coding is `chunked`, and ignores an empty or blank Transfer-Encoding (the
 * body then goes by its Content-Length); an upstream may read either otherwise. So the one
 * Transfer-Encoding taken is `chunked` itself: an empty one once sent a body upstream with no
 * framing at all, a denied write smuggled inside an allowed one (found in review).
 */
export function framingProblem(headers: IncomingHttpHeaders): string | null {
  const te = headers['transfer-encoding']
  if (te === undefined || te.trim().toLowerCase() === 'chunked') return null
  return 'Transfer-Encoding other than chunked'
}

/** Marks a request whose body goes upstream as it arrives, chunked, for `keepChunked`. */
export function markChunked(req: IncomingMessage, read: Buffer | undefined): void {
  // Forwarded as the one value `framingProblem` lets through, never the agent's own spelling.
  if (!read && req.headers['transfer-encoding'] !== undefined)
    (req as IncomingMessage & { wgChunked?: string }).wgChunked = 'chunked'
}

/** Whether a request says it carries a body: a Transfer-Encoding, or a Content-Length above 0. */
export function carriesBody(headers: IncomingHttpHeaders): boolean {
  const length = headers['content-length']
  return headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0')
}

/**
 * Methods whose body every server reads. Any other request that carries one (a GET, a DELETE)
 * goes upstream on a connection of its own: a server may leave such a body unread (a "CL.0"
 * flaw), and its bytes must not be read there as the next request on a pooled connection.
 */
export const BODY_READ_BY_EVERY_SERVER: ReadonlySet<string> = new Set(['POST', 'PUT', 'PATCH'])
