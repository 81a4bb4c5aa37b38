import type { IncomingMessage, ServerResponse } from 'node:http'
import type { EchoNeedles } from '../core/credential-echo.js'
import type { RewrittenAnswer } from './call-writes.js'

/** What the proxy keeps on an agent's request while forwarding it, for its event handlers. */
export type Forwarded = IncomingMessage & {
  wgReceipt?: string
  wgStart?: number
  wgSystemId?: string
  wgContinued?: boolean
  /** Its cut was logged (http-proxy reports one cut more than once). */
  wgCut?: boolean
  /** The answer is relayed rewritten (MCP's filterToolsList), not piped. */
  wgRewrite?: RewrittenAnswer
  /** Its upstream connection is not kept for another request (a read that carried a body). */
  wgCloseUpstream?: boolean
  /** It carried an injected credential: its answer is searched for these before it is relayed. */
  wgEcho?: EchoNeedles
  /** Its answer was withheld (answered instead, or cut), for carrying back the credential. */
  wgWithheld?: boolean
  /** The upstream's answer arrived and is being relayed: a later error cannot be answered instead. */
  wgAnswered?: boolean
}

/**
 * An agent that sent `Expect: 100-continue` (the server hands those to us undecided) gets its
 * 100 only once its body is wanted: forwarded, or read to stage it. A write refused first is
 * answered without it, and the body it held back is never uploaded.
 */
export function continueIfExpected(req: IncomingMessage, res: ServerResponse): void {
  const r = req as Forwarded
  if (r.wgContinued || res.headersSent) return
  const expect = req.headers.expect
  // As Node's server: an interim 100 is HTTP/1.1's; an HTTP/1.0 client is not waiting for one.
  if (
    req.httpVersion === '1.1' &&
    typeof expect === 'string' &&
    expect.toLowerCase().includes('100-continue')
  ) {
    r.wgContinued = true
    res.writeContinue()
  }
}
