import type { IncomingMessage, ServerResponse } from 'node:http'
import { performance } from 'node:perf_hooks'
import type { ProxyServer } from 'http-proxy-3'
import type { SystemRecord } from '../core/enrolled-system.js'
import { ERRORS } from '../core/errors.js'
import type { Logger } from '../observability/logger.js'
import { PrivateAddressRefused } from '../systems/public-address-lookup.js'
import { BODY_READ_BY_EVERY_SERVER, carriesBody, frameBody, markChunked } from './body-framing.js'
import { sendReadBody } from './buffered-body.js'
import type { InjectedCredential, RewrittenAnswer } from './call-writes.js'
import { continueIfExpected, type Forwarded } from './forwarded-request.js'
import { forwardedHeaders } from './hop-by-hop.js'
import { BarredBeforeBodyEnd } from './late-body.js'
import { OVERRIDE_HEADERS } from './method-override.js'
import { sendJson, sendRefusal } from './proxy-responses.js'
import { UPSTREAM_TIMEOUT_CODE } from './upstream-agent.js'
import { GRANT_HEADER, RECEIPT_HEADER } from './writegate-headers.js'

/**
 * Headers an agent may not pass upstream: its own credentials, writegate's own, and any that
 * would make the upstream see another method, path or host than the one decided. (Hop-by-hop
 * headers, Proxy-Authorization among them, are stripped before these.)
 */
const STRIPPED: ReadonlySet<string> = new Set([
  'authorization',
  GRANT_HEADER,
  RECEIPT_HEADER,
  ...OVERRIDE_HEADERS,
  // The agent's expectation was the proxy's to meet (continueIfExpected); the body goes out whole.
  'expect',
])

/**
 * OpenSSL's and Node's codes for an upstream certificate that does not verify: every verify error
 * Node names (crypto_common.cc), and UNSPECIFIED, which it gives those it does not name (a name
 * constraint or a key usage the chain breaks: found in review, answered upstream_error, which
 * says the write may have been sent, though the handshake had failed).
 */
const CERTIFICATE_ERRORS =
  /^(CERT_|CRL_|UNABLE_TO_|ERROR_IN_C(ERT|RL)_|DEPTH_ZERO_SELF_SIGNED_CERT$|SELF_SIGNED_CERT_IN_CHAIN$|ERR_TLS_CERT_ALTNAME_INVALID$|HOSTNAME_MISMATCH$|INVALID_CA$|INVALID_PURPOSE$|PATH_LENGTH_EXCEEDED$|UNSPECIFIED$)/

/** Whether an upstream request's error code says its certificate did not verify (nothing was sent). */
export const certificateFailure = (code: string | undefined): boolean =>
  code !== undefined && CERTIFICATE_ERRORS.test(code)

export interface UpstreamForwardingDeps {
  logger: Logger
  /** The upstream proxy pool's (upstream-proxy-pool.ts). */
  proxyOf(system: SystemRecord): ProxyServer
  clientWentAway(req: IncomingMessage): void
}

/** Sends a decided or passing request to its system's upstream. */
export type Forward = (
  req: IncomingMessage,
  res: ServerResponse,
  system: SystemRecord,
  credential: InjectedCredential | null,
  path: string,
  receiptId: string | null,
  buffered?: Buffer,
  rewritten?: RewrittenAnswer,
) => void

/** What the agent's response may still report once it is over: nothing to do (see forward). */
function ignoreResponseError(): void {}

/**
 * Forwarding: the agent's request, its headers stripped and the credential injected, goes to
 * the system's upstream proxy; an upstream that cannot be reached is answered for.
 */
export function createUpstreamForwarding(deps: UpstreamForwardingDeps): { forward: Forward } {
  const { logger, proxyOf, clientWentAway } = deps
  const clientGone = (req: IncomingMessage, res: ServerResponse) => res.destroyed || req.socket.destroyed

  const forward: Forward = (req, res, system, credential, path, receiptId, buffered, rewritten) => {
    // Not req.destroyed: a request whose body was read (to stage it) is destroyed once read.
    if (clientGone(req, res)) {
      // Gone while its write was decided: the decision and its receipt stand, and nothing was
      // sent. On record, for whoever reconciles the receipt; the client's doing, so at info.
      // (A read or stream that passes ungated has no receipt to reconcile: nothing to say.)
      if (receiptId)
        logger.info(
          { system: system.systemId, receiptId },
          'client went away before its write was forwarded: nothing was sent upstream',
        )
      return
    }
    continueIfExpected(req, res)
    // Set on the agent's headers, which http-proxy copies, rather than in its 'proxyReq' event:
    // it skips that event for a request carrying `Expect`, which would go out without them.
    // The upstream learns which receipt authorised the write, so it can log or reconcile it.
    // A request with a body, but for a POST, PUT or PATCH, asks the upstream to close its
    // connection, and the connection is not kept for another request, whether it passes ungated
    // or was decided, streamed or read whole (a GraphQL GET). Servers with a CL.0 flaw ignore the
    // body of a GET or a DELETE: its bytes would start a request of the agent's writing, whose own
    // length swallows the next request the proxy sends on that pooled connection, injected
    // credential and all, where the agent can read it back.
    const closeAfter =
      !BODY_READ_BY_EVERY_SERVER.has(req.method ?? '') &&
      (carriesBody(req.headers) || (buffered?.length ?? 0) > 0)
    const set: Record<string, string | null> = {
      [RECEIPT_HEADER]: receiptId,
      connection: closeAfter ? 'close' : null,
    }
    if (credential) {
      set[credential.header] = credential.value
      // Its answer is searched for the secret: asked for uncompressed (one compressed anyway is withheld).
      if (credential.needles.forms.length > 0) set['accept-encoding'] = 'identity'
    }
    req.headers = forwardedHeaders(
      req.headers,
      STRIPPED,
      set,
      // A rewritten answer is read whole: asked for uncompressed (one that comes compressed anyway is refused).
      rewritten ? 'accept-encoding' : undefined,
    )
    frameBody(req.headers, buffered)
    markChunked(req, buffered)
    req.url = path
    const r = req as Forwarded
    r.wgSystemId = system.systemId
    r.wgStart = performance.now()
    if (receiptId) r.wgReceipt = receiptId
    if (rewritten) r.wgRewrite = rewritten
    if (closeAfter) r.wgCloseUpstream = true
    if (credential && credential.needles.forms.length > 0) r.wgEcho = credential.needles
    const onError = (err: Error) => {
      const code = (err as NodeJS.ErrnoException)?.code
      const timedOut = code === UPSTREAM_TIMEOUT_CODE || code === 'ETIMEDOUT'
      if (clientGone(req, res)) return clientWentAway(req)
      if (err instanceof BarredBeforeBodyEnd) return refuseLateBody(res, err, system, receiptId)
      // The answer came and is on its way to the agent (its end, if cut, cuts the agent's): an
      // error after it (bytes past its Content-Length, which Node parses as a next answer) is
      // the connection's, not this write's. Answering it too wrote into the relayed response
      // after its end, and the unhandled error ended the process (found in review).
      if (r.wgAnswered) {
        logger.warn({ code, system: system.systemId }, 'upstream connection failed after its answer')
        return
      }
      logger.warn({ err, system: system.systemId }, 'upstream request failed')
      if (!res.headersSent) {
        // A certificate that does not verify fails the handshake, and a name that now resolves
        // inside fails the lookup: either way nothing of the write was sent.
        const certificate = certificateFailure(code)
        const inside = err instanceof PrivateAddressRefused
        const def = timedOut
          ? ERRORS.upstreamTimeout
          : certificate
            ? ERRORS.upstreamCertificateInvalid
            : inside
              ? ERRORS.upstreamAddressRefused
              : ERRORS.upstreamError
        sendJson(res, def.status, {
          error: timedOut || certificate || inside ? def.message : 'upstream unreachable',
          code: def.code,
          ...(certificate ? { certificateError: code } : {}),
          ...(receiptId ? { receiptId } : {}),
        })
      } else res.destroy()
    }
    // A write into an ended response is an 'error' event; with no listener, the process's end.
    res.on('error', ignoreResponseError)
    const proxy = proxyOf(system)
    // Per-request options cost a merge on every call: only the rare rewritten answer pays it.
    if (buffered) sendReadBody(req, buffered)
    if (rewritten) proxy.web(req, res, { selfHandleResponse: true }, onError)
    else proxy.web(req, res, onError)
  }

  /** A write whose key was barred while its body arrived: never completed upstream (late-body.ts). */
  function refuseLateBody(
    res: ServerResponse,
    err: BarredBeforeBodyEnd,
    system: SystemRecord,
    receiptId: string | null,
  ): void {
    logger.warn(
      { system: system.systemId, receiptId, barred: err.barred?.reason ?? 'standing_unreadable' },
      "the key was barred before the write's body had arrived: the upstream request was abandoned before its end",
    )
    if (res.headersSent) return void res.destroy()
    const withReceipt = receiptId ? { receiptId } : {}
    if (err.barred)
      sendRefusal(res, ERRORS.revoked, ERRORS.revoked.message, { barred: err.barred.reason, ...withReceipt })
    else sendRefusal(res, ERRORS.gateUnavailable, ERRORS.gateUnavailable.message, withReceipt)
  }

  return { forward }
}
