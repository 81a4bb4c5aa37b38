import type { ClientRequest, Agent as HttpAgent, IncomingMessage, ServerResponse } from 'node:http'
import { performance } from 'node:perf_hooks'
import type { Duplex } from 'node:stream'
import { createProxyServer, type ProxyServer } from 'http-proxy-3'
import type { SystemRecord } from '../core/enrolled-system.js'
import { ERRORS } from '../core/errors.js'
import type { Logger } from '../observability/logger.js'
import type { Metrics } from '../observability/metrics.js'
import { keepChunked, SENDING_PASS } from './body-framing.js'
import { guardAnswer, type WithheldReason } from './echo-guard.js'
import type { Forwarded } from './forwarded-request.js'
import { blankHopByHop } from './hop-by-hop.js'
import { sendJson } from './proxy-responses.js'
import { relayRewritten, rewriteReadsBody } from './rewritten-response.js'
import { RECEIPT_HEADER } from './writegate-headers.js'

/** An answer read whole to be rewritten (a tools/list result), or one event of a stream, is refused past this. */
export const MAX_REWRITTEN_ANSWER_BYTES = 16 * 1024 * 1024

/** How a system's upstream is connected to: verified against its bundle, held to public addresses. */
export interface UpstreamConnection {
  caBundle?: string | undefined
  publicOnly: boolean
}

export interface UpstreamProxyPoolDeps {
  /** Keep-alive connections to an upstream origin. */
  agentFor: (origin: URL, how: UpstreamConnection) => HttpAgent
  logger: Logger
  metrics: Metrics
}

/** The http-proxy servers that carry agents' requests upstream, and what their answers go through. */
export interface UpstreamProxyPool {
  /** The proxy server for a system's upstream, created on first use. */
  proxyOf(system: SystemRecord): ProxyServer
  /** Logs, once, that the agent hung up while its request was being forwarded. */
  clientWentAway(req: IncomingMessage): void
  /** Closes every proxy server created. */
  close(): void
}

/**
 * The upstream proxies, one per origin, and the handling of every answer they relay: a status
 * that cannot be relayed, a cut answer, the credential echoed back, hop-by-hop and Connection
 * headers, the receipt header, and answers relayed rewritten.
 */
export function createUpstreamProxyPool(deps: UpstreamProxyPoolDeps): UpstreamProxyPool {
  const { logger, metrics } = deps
  // The agent hanging up mid-forward is the agent's doing: the decision and its receipt stand,
  // and it is no failure of the proxy or the upstream. http-proxy reports it as `econnreset`.
  function clientWentAway(req: IncomingMessage): void {
    const r = req as Forwarded
    if (r.wgCut) return
    r.wgCut = true
    logger.info(
      { system: r.wgSystemId, receiptId: r.wgReceipt },
      'client request cut short while forwarding (it went away, or sent what is no HTTP)',
    )
  }
  function onUnaskedUpgrade(this: ClientRequest, _res: IncomingMessage, socket: Duplex): void {
    socket.destroy()
    this.emit(
      'error',
      Object.assign(new Error('the upstream switched protocols unasked'), { code: 'WG_UPGRADE' }),
    )
  }

  /**
   * One http-proxy server per upstream origin, its target and agent fixed at creation. Options
   * passed per request are merged into a fresh object on every call, and every later pass then
   * reads its options off that object: measurably slower than a server's own options.
   */
  const proxies = new Map<string, ProxyServer>()
  function proxyFor(upstream: string, how: UpstreamConnection): ProxyServer {
    const key = `${upstream}\n${how.publicOnly ? 'public' : 'any'}\n${how.caBundle ?? ''}`
    let proxy = proxies.get(key)
    if (proxy) return proxy
    const origin = new URL(upstream)
    proxy = createProxyServer({
      target: origin,
      agent: deps.agentFor(origin, how),
      xfwd: false,
      changeOrigin: true,
      // No proxyTimeout: the origin's agent cuts a silent upstream (upstream-agent.ts).
      followRedirects: false,
    })
    // Before the pass that sends it, a chunked body's framing is put back (body-framing.ts).
    proxy.before('web', SENDING_PASS, keepChunked)
    proxy.on('econnreset', (_err, req) => clientWentAway(req))
    // No upgrade is ever forwarded (the agent's Upgrade is stripped): a 101 is the upstream
    // switching protocols unasked. With no 'upgrade' listener Node drops the socket and tells no
    // one, and the agent would wait for an answer for ever: failed instead, as an upstream error.
    proxy.on('proxyReq', (proxyReq) => proxyReq.on('upgrade', onUnaskedUpgrade))
    proxy.on('proxyRes', (proxyRes, req, res) => {
      const r = req as Forwarded
      // Node's client takes a status the server side throws on, outside any handler: one
      // upstream answering `HTTP/1.1 000 X` or a control byte in its reason ended the process,
      // the control plane with it in the embedded default (found in review).
      if (!relayableStatus(proxyRes)) {
        r.wgWithheld = true
        proxyRes.destroy()
        logger.warn(
          { system: r.wgSystemId, status: proxyRes.statusCode },
          'upstream answered a status that cannot be relayed',
        )
        sendJson(res, ERRORS.upstreamError.status, {
          error: 'the upstream answered with a status that cannot be relayed',
          code: ERRORS.upstreamError.code,
          ...(r.wgReceipt ? { receiptId: r.wgReceipt } : {}),
        })
        return
      }
      r.wgAnswered = true
      // An upstream response cut short (a body silent past the timeout, a reset) must cut the
      // agent's short too: http-proxy's pipe would leave it waiting for the rest forever.
      proxyRes.once('close', () => {
        if (!proxyRes.complete && !res.destroyed && !r.wgWithheld) res.destroy()
      })
      // The rewrite refuses a compressed answer it reads; one it passes unread (an error, an
      // empty answer) is judged here, or a gzipped echo of the credential reached the agent
      // (found in review).
      const judgedByRewrite = !!r.wgRewrite && rewriteReadsBody(proxyRes)
      if (r.wgEcho && !guardAnswer(proxyRes, req.method ?? '', r.wgEcho, echoGuard(r, res), judgedByRewrite))
        return
      // Node keeps a connection whose answer says keep-alive, though the request said close:
      // not this one (see forward).
      if (r.wgCloseUpstream)
        (proxyRes as unknown as { req: { shouldKeepAlive: boolean } }).req.shouldKeepAlive = false
      blankHopByHop(proxyRes.headers)
      // http-proxy fills a missing Connection from the request's, which forwardedHeaders left out, or
      // else says keep-alive: a client that sent Connection: close would be kept waiting on an
      // open socket. Say what Node decided for this client.
      proxyRes.headers.connection = (res as unknown as { shouldKeepAlive: boolean }).shouldKeepAlive
        ? 'keep-alive'
        : 'close'
      // The agent reads this header as writegate's word that a decision was made; an upstream
      // (answering an ungated read, say) cannot speak for writegate. Blank, not deleted: as above.
      proxyRes.headers[RECEIPT_HEADER] = r.wgReceipt
      if (r.wgStart !== undefined)
        metrics.observeUpstream(r.wgSystemId ?? '', (performance.now() - r.wgStart) / 1000)
      const rewritten = r.wgRewrite
      if (rewritten)
        relayRewritten(proxyRes, res, rewritten.rewrite, {
          maxBytes: MAX_REWRITTEN_ANSWER_BYTES,
          unreadable(problem, headersSent) {
            metrics.gateEvents.failedClosed({ reason: 'tools_list_unfilterable' })
            logger.warn({ system: r.wgSystemId, problem }, 'MCP answer not relayed: it could not be filtered')
            if (!headersSent) rewritten.unreadable(problem)
          },
        })
    })
    proxies.set(key, proxy)
    return proxy
  }

  /** What happens to an answer that carries back the injected credential (echo-guard.ts). */
  function echoGuard(r: Forwarded, res: ServerResponse) {
    const withheld = (reason: WithheldReason, header?: string) => {
      r.wgWithheld = true
      metrics.gateEvents.failedClosed({ reason })
      logger.warn(
        { system: r.wgSystemId, receiptId: r.wgReceipt, reason, ...(header ? { header } : {}) },
        reason === 'answer_compressed'
          ? 'upstream answer withheld: compressed, so it could not be searched for the injected credential'
          : 'upstream answer withheld: it carried back the injected credential',
      )
    }
    const answer = (reason: WithheldReason) => {
      const def = ERRORS.answerWithheld
      sendJson(
        res,
        def.status,
        { error: def.message, code: def.code, reason, ...(r.wgReceipt ? { receiptId: r.wgReceipt } : {}) },
        { connection: 'close' },
      )
    }
    return {
      withhold(reason: WithheldReason, header?: string) {
        withheld(reason, header)
        answer(reason)
      },
      cut() {
        // Answered already (a rewritten answer refused as unreadable, whose body still flows): that
        // stands, and the close of the upstream's answer must not cut it.
        if (res.writableEnded) {
          r.wgWithheld = true
          return
        }
        withheld('credential_echoed')
        // Node writes the headers with the first chunk of the body: if that chunk is the one cut,
        // nothing has gone out, and the agent is answered, as for an echo in a header.
        if (res.headersSent || res.destroyed) {
          res.destroy()
          return
        }
        for (const name of res.getHeaderNames()) res.removeHeader(name)
        res.sendDate = true // removing `date` turned it off
        res.statusMessage = '' // http-proxy set the upstream's: the 502 gets its own
        // The pipe still writes this chunk, to an ended answer: Node reports that as an error.
        res.on('error', () => {})
        answer('credential_echoed')
      },
    }
  }

  /** The proxy for a system record: records are kept per snapshot, so most requests find theirs here. */
  const proxyOfRecord = new WeakMap<SystemRecord, ProxyServer>()
  function proxyOf(system: SystemRecord): ProxyServer {
    let proxy = proxyOfRecord.get(system)
    if (!proxy) {
      proxy = proxyFor(system.upstream, { caBundle: system.caBundle, publicOnly: system.publicOnly === true })
      proxyOfRecord.set(system, proxy)
    }
    return proxy
  }

  return {
    proxyOf,
    clientWentAway,
    close() {
      for (const proxy of proxies.values()) proxy.close()
    },
  }
}

/**
 * Whether Node's server can write the upstream's status line: a code of three digits from 100
 * (its client also takes 0 to 99), and a reason phrase without control bytes, which is blanked
 * (Node then writes the standard one) rather than refused.
 */
function relayableStatus(proxyRes: IncomingMessage): boolean {
  const code = proxyRes.statusCode ?? 0
  if (code < 100 || code > 999) return false
  if (proxyRes.statusMessage && !/^[\t\x20-\x7e\x80-\xff]*$/.test(proxyRes.statusMessage))
    proxyRes.statusMessage = ''
  return true
}
