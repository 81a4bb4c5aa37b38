import type { IncomingMessage } from 'node:http'
import {
  answerEncoded,
  createEchoScanner,
  type EchoNeedles,
  headerEcho,
  holdsEcho,
} from '../core/credential-echo.js'

export type WithheldReason = 'credential_echoed' | 'answer_compressed'

export interface EchoGuardEvents {
  /** Before anything was relayed: the caller answers the agent instead. */
  withhold(reason: WithheldReason, header?: string): void
  /**
   * The body echoed it. The chunk is not relayed: http-proxy's pipe, which runs next, must find
   * the agent's answer ended (the caller answers it, if nothing of it was written yet) or
   * destroyed (the caller cuts the connection).
   */
  cut(): void
}

/**
 * Guards an upstream's answer to a request that carried an injected credential (see
 * core/credential-echo.ts): its headers are searched now, its body chunk by chunk as it is
 * relayed. Called from the 'proxyRes' event, before http-proxy writes the headers and pipes the
 * body, so a listener added here sees each chunk before the pipe relays it. Returns false when
 * the answer is withheld (`withhold` was called and the body is discarded).
 */
export function guardAnswer(
  proxyRes: IncomingMessage,
  method: string,
  needles: EchoNeedles,
  on: EchoGuardEvents,
  /** The answer is read whole and refused if compressed by its relay (an MCP tools/list rewrite), in its own terms. */
  codingJudgedElsewhere = false,
): boolean {
  // The request asked for identity; a compressed body cannot be searched. One with no body is
  // harmless. Node undoes chunked framing only: `Transfer-Encoding: gzip, chunked` arrives gzipped.
  if (!codingJudgedElsewhere && answerEncoded(proxyRes.headers) && mayHaveBody(proxyRes, method)) {
    proxyRes.destroy()
    on.withhold('answer_compressed')
    return false
  }
  // The status line's reason text is relayed too (http-proxy copies it).
  const header = holdsEcho(proxyRes.statusMessage ?? '', needles)
    ? ':status'
    : headerEcho(proxyRes.headers, needles)
  if (header !== null) {
    proxyRes.destroy()
    on.withhold('credential_echoed', header)
    return false
  }
  const scanner = createEchoScanner(needles)
  const watch = (chunk: Buffer | string) => {
    if (!scanner.push(chunk)) return
    proxyRes.off('data', watch)
    proxyRes.destroy()
    on.cut()
  }
  proxyRes.on('data', watch)
  return true
}

function mayHaveBody(res: IncomingMessage, method: string): boolean {
  const status = res.statusCode ?? 0
  if (method === 'HEAD' || status === 204 || status === 304 || (status >= 100 && status < 200)) return false
  return res.headers['content-length'] !== '0'
}
