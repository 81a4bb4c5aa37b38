import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http'
import { type MessageRewrite, rewritePayload } from './mcp-tools-filter.js'
import { createSseSplitter, eventData, withData } from './sse-events.js'

const JSON_TYPE = /^application\/(?:[\w.+-]+\+)?json\b/i
const SSE_TYPE = /^text\/event-stream\b/i

export interface RewriteOptions {
  /** A JSON answer, or one event of a stream, larger than this cannot be judged: fail closed. */
  maxBytes: number
  /**
   * The answer cannot be read to rewrite it (not JSON, compressed, too large, an event whose
   * data is not JSON). Before the headers went out the caller answers the refusal; after (a
   * stream already under way), the connection has been cut and `headersSent` is true.
   */
  unreadable(problem: string, headersSent: boolean): void
}

/**
 * An upstream's answer, relayed with every JSON-RPC message in it passed through `rewrite`:
 * a JSON body is read whole (bounded) and sent again; an event stream is relayed event by
 * event, each as it arrives, unchanged events byte for byte. What cannot be read is not
 * relayed: nothing the rewrite would have taken out may reach the agent by way of an answer
 * the proxy could not read. Error answers without JSON and empty answers pass unchanged.
 */
/**
 * Whether relayRewritten reads this answer's body (JSON or an event stream) and so judges its
 * encoding itself; the other answers it passes unchanged, unread.
 */
export function rewriteReadsBody(proxyRes: IncomingMessage): boolean {
  const type = String(proxyRes.headers['content-type'] ?? '')
  return JSON_TYPE.test(type) || SSE_TYPE.test(type)
}

export function relayRewritten(
  proxyRes: IncomingMessage,
  res: ServerResponse,
  rewrite: MessageRewrite,
  opts: RewriteOptions,
): void {
  const status = proxyRes.statusCode ?? 502
  const headers: OutgoingHttpHeaders = {}
  for (const [name, value] of Object.entries(proxyRes.headers))
    if (value !== undefined && name !== 'content-length' && name !== 'transfer-encoding')
      headers[name] = value
  const type = String(proxyRes.headers['content-type'] ?? '')
  const encoding = String(proxyRes.headers['content-encoding'] ?? 'identity').toLowerCase()
  const json = JSON_TYPE.test(type)
  const sse = SSE_TYPE.test(type)
  const fail = (problem: string) => {
    proxyRes.resume()
    opts.unreadable(problem, false)
  }
  if (!json && !sse) {
    const empty = proxyRes.headers['content-length'] === '0' || status === 202 || status === 204
    if (status < 300 && !empty) {
      fail('the answer is neither JSON nor an event stream')
      return
    }
    // An error or an empty answer holds no result to filter.
    if (proxyRes.headers['content-length'] !== undefined)
      headers['content-length'] = proxyRes.headers['content-length']
    res.writeHead(status, headers)
    proxyRes.pipe(res)
    return
  }
  // The request went out without Accept-Encoding; a server that compresses anyway is not read.
  if (encoding !== 'identity') fail(`the answer is compressed (${encoding})`)
  else if (json) relayJson(proxyRes, res, status, headers, rewrite, opts, fail)
  else relayEvents(proxyRes, res, status, headers, rewrite, opts)
}

function relayJson(
  proxyRes: IncomingMessage,
  res: ServerResponse,
  status: number,
  headers: OutgoingHttpHeaders,
  rewrite: MessageRewrite,
  opts: RewriteOptions,
  fail: (problem: string) => void,
): void {
  const declared = Number(proxyRes.headers['content-length'])
  if (Number.isFinite(declared) && declared > opts.maxBytes) {
    fail('the answer is too large to read')
    return
  }
  const chunks: Buffer[] = []
  let size = 0
  let failed = false
  proxyRes.on('data', (chunk: Buffer) => {
    if (failed) return
    size += chunk.length
    if (size > opts.maxBytes) {
      failed = true
      chunks.length = 0
      fail('the answer is too large to read')
      return
    }
    chunks.push(chunk)
  })
  proxyRes.once('end', () => {
    if (failed) return
    const body = Buffer.concat(chunks)
    let payload: unknown
    try {
      payload = JSON.parse(body.toString('utf8'))
    } catch {
      return opts.unreadable('the answer is not JSON', false)
    }
    const out = rewrittenText(payload, rewrite)
    if (out === null) return opts.unreadable('the answer nests too deep to rewrite', false)
    headers['content-length'] = out === undefined ? body.length : Buffer.byteLength(out)
    res.writeHead(status, headers)
    res.end(out ?? body)
  })
}

/**
 * A payload rewritten and serialised again: undefined when unchanged, null when it nests too
 * deep for JSON.stringify (a RangeError thrown in a stream's 'end' would end the process).
 */
function rewrittenText(payload: unknown, rewrite: MessageRewrite): string | undefined | null {
  const rewritten = rewritePayload(payload, rewrite)
  if (rewritten === undefined) return undefined
  try {
    return JSON.stringify(rewritten)
  } catch {
    return null
  }
}

function relayEvents(
  proxyRes: IncomingMessage,
  res: ServerResponse,
  status: number,
  headers: OutgoingHttpHeaders,
  rewrite: MessageRewrite,
  opts: RewriteOptions,
): void {
  res.writeHead(status, headers)
  // A stream goes out as it comes (a server may hold it open for long); flushed per event.
  res.flushHeaders()
  let cut = false
  // A slow agent holds the stream back: the upstream is paused rather than read into memory.
  let backpressured = false
  const send = (text: string) => {
    if (!res.write(text)) backpressured = true
  }
  const cutShort = (problem: string) => {
    if (cut) return
    cut = true
    proxyRes.destroy()
    res.destroy()
    opts.unreadable(problem, true)
  }
  const events = createSseSplitter((lines, raw) => {
    if (cut) return
    const data = eventData(lines)
    if (data === null || data === '') return send(raw)
    let payload: unknown
    try {
      payload = JSON.parse(data)
    } catch {
      return cutShort('an event of the stream is not JSON')
    }
    const text = rewrittenText(payload, rewrite)
    if (text === null) return cutShort('an event of the stream nests too deep to rewrite')
    send(text === undefined ? raw : withData(lines, text))
  })
  // An agent that goes away (perhaps while the stream is paused for it) ends the upstream's too.
  res.once('close', () => {
    if (!proxyRes.complete) proxyRes.destroy()
  })
  proxyRes.setEncoding('utf8')
  proxyRes.on('data', (chunk: string) => {
    if (cut) return
    events.feed(chunk)
    if (events.held > opts.maxBytes) return cutShort('an event of the stream is too large to read')
    if (backpressured) {
      backpressured = false
      proxyRes.pause()
      res.once('drain', () => proxyRes.resume())
    }
  })
  proxyRes.once('end', () => {
    if (cut) return
    // An event never ended by a blank line is discarded by clients; it is not relayed unread.
    events.rest()
    res.end()
  })
}
