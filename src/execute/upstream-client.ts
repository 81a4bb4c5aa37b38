import type { LookupFunction } from 'node:net'
import { performance } from 'node:perf_hooks'
import { type Dispatcher, Pool } from 'undici'
import {
  answerEncoded,
  type EchoNeedles,
  echoNeedles,
  headerEcho,
  holdsEcho,
  NO_NEEDLES,
} from '../core/credential-echo.js'
import type { SystemRecord } from '../core/enrolled-system.js'
import type { Injection } from '../systems/credential-resolver.js'
import { PRIVATE_ADDRESS_CODE, publicOnlyLookup } from '../systems/public-address-lookup.js'
import { checkUpstreamPath } from './upstream-url.js'

export interface UpstreamSettings {
  connectTimeoutMs: number
  headersTimeoutMs: number
  bodyTimeoutMs: number
  maxResponseBytes: number
  connectionsPerOrigin: number
  deadlineMs: number
}

export interface UpstreamRequest {
  method: string
  /** Checked with checkUpstreamPath; the origin is always the system's. */
  path: string
  /** Exact bytes to send (the JCS of the bound body, or a replayed body), or null for none. */
  body: string | Buffer | null
  /** Sent as content-type with a body; null sends none. */
  contentType: string | null
  idempotencyKey: string | null
  /** The EXECUTE receipt that authorised this write, so the upstream can log or reconcile it (as the proxy does). */
  receiptId: string
  /** A replayed request's protocol headers (REPLAYED_HEADERS: accept, MCP's session and version). */
  headers?: Record<string, string> | undefined
}

export type UpstreamFailure =
  | 'connect_timeout'
  | 'connect_failed'
  /** The name of a `publicOnly` system resolved to a private address: never connected. */
  | 'private_address'
  | 'headers_timeout'
  | 'body_timeout'
  /** `deadlineMs` passed before the answer was complete (an upstream trickling its body, say). */
  | 'deadline_exceeded'
  | 'response_too_large'
  | 'request_failed'
  /** The answer carried back the injected credential (core/credential-echo.ts): not relayed. */
  | 'credential_echoed'
  /** Compressed though asked for uncompressed, so it could not be searched for the credential: not relayed. */
  | 'answer_compressed'

/** Whether a failure is an answer withheld for the injected credential (nothing of it is told). */
export const withholds = (failure: UpstreamFailure | undefined): boolean =>
  failure === 'credential_echoed' || failure === 'answer_compressed'

/** Why an answer to a request that carried a credential is not relayed, or null. */
function withheldFor(
  headers: Record<string, string | string[] | undefined>,
  body: Buffer,
  needles: EchoNeedles,
): UpstreamFailure | null {
  if (body.length > 0 && answerEncoded(headers)) return 'answer_compressed'
  if (headerEcho(headers, needles) !== null || holdsEcho(body, needles)) return 'credential_echoed'
  return null
}

/** Whether a failure is a wait that ran out (reported as `timeout: true`). */
export const isTimeout = (failure: UpstreamFailure): boolean =>
  failure.endsWith('_timeout') || failure === 'deadline_exceeded'

export type UpstreamOutcome =
  | {
      kind: 'response'
      status: number
      contentType: string | null
      /** A redirect's target, reported as-is (never followed). */
      location: string | null
      body: Buffer
      latencyMs: number
      /**
       * Why the body is missing (empty here) though the status arrived: it outgrew
       * `maxResponseBytes` or stalled. The upstream answered, so the write's fate is its status's.
       */
      incomplete?: UpstreamFailure
    }
  | {
      kind: 'failed'
      failure: UpstreamFailure
      /** False when no byte of the request can have reached the upstream (it never connected). */
      sent: boolean
      /** Set when the status line arrived before the failure (a body cut off, say). */
      status: number | null
      latencyMs: number
    }

export interface UpstreamClient {
  /** Sends one request to the enrolled system's fixed origin, with its injected credential (resolved by the caller). */
  send(system: SystemRecord, credential: Injection | null, req: UpstreamRequest): Promise<UpstreamOutcome>
  close(): Promise<void>
}

const USER_AGENT = 'writegate'

function failureOf(err: unknown): { failure: UpstreamFailure; sent: boolean } {
  const code = (err as { code?: string }).code
  switch (code) {
    case 'UND_ERR_CONNECT_TIMEOUT':
      return { failure: 'connect_timeout', sent: false }
    case 'ECONNREFUSED':
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
      return { failure: 'connect_failed', sent: false }
    case PRIVATE_ADDRESS_CODE:
      return { failure: 'private_address', sent: false }
    case 'UND_ERR_HEADERS_TIMEOUT':
      return { failure: 'headers_timeout', sent: true }
    case 'UND_ERR_BODY_TIMEOUT':
      return { failure: 'body_timeout', sent: true }
    default:
      return { failure: 'request_failed', sent: true }
  }
}

/**
 * One keep-alive undici Pool per upstream origin, opened on first use (systems are enrolled
 * while the service runs). Nothing from the caller becomes a header: the upstream sees
 * content-type, idempotency-key, x-writegate-receipt, the injected credential and a user
 * agent, and for a replayed proxy request only the protocol headers it was staged with
 * (REPLAYED_HEADERS: accept and MCP's session and version). Redirects are returned, never followed.
 */
export function createUpstreamClient(deps: {
  settings: UpstreamSettings
  /** How upstream names are resolved (tests point names at loopback); the system resolver if absent. */
  lookup?: LookupFunction | undefined
}): UpstreamClient {
  const { settings } = deps
  const pools = new Map<string, Pool>()
  const publicOnly = publicOnlyLookup(deps.lookup)
  const poolFor = (system: SystemRecord): Pool => {
    const { origin } = new URL(system.upstream)
    const { caBundle } = system
    const held = system.publicOnly === true
    const key = `${origin}\n${held ? 'public' : 'any'}\n${caBundle ?? ''}`
    let pool = pools.get(key)
    if (!pool) {
      const lookup = held ? publicOnly : deps.lookup
      pool = new Pool(origin, {
        connections: settings.connectionsPerOrigin,
        // An https upstream is verified against the system's caBundle, else the trust store; a
        // `publicOnly` system's name must resolve to public addresses at every connection.
        connect: {
          timeout: settings.connectTimeoutMs,
          ...(caBundle ? { ca: caBundle } : {}),
          ...(lookup ? { lookup } : {}),
        },
        headersTimeout: settings.headersTimeoutMs,
        bodyTimeout: settings.bodyTimeoutMs,
      })
      pools.set(key, pool)
    }
    return pool
  }

  return {
    async send(system, credential, req) {
      const pool = poolFor(system)
      // The callers have checked the path already; this is the last line before the socket.
      const verdict = checkUpstreamPath(req.path, '/')
      if (!verdict.ok) throw new Error(`unsafe upstream path: ${verdict.problem}`)

      const headers: Record<string, string> = { 'user-agent': USER_AGENT, accept: '*/*', ...req.headers }
      if (req.body !== null && req.contentType !== null) headers['content-type'] = req.contentType
      if (req.idempotencyKey !== null) headers['idempotency-key'] = req.idempotencyKey
      headers['x-writegate-receipt'] = req.receiptId
      const needles = credential ? echoNeedles(credential.secret) : NO_NEEDLES
      if (credential) headers[credential.header] = credential.value
      // Its answer is searched for the secret, so it is asked for uncompressed.
      if (needles.forms.length > 0) headers['accept-encoding'] = 'identity'

      const t0 = performance.now()
      const elapsed = () => Math.round(performance.now() - t0)
      let status: number | null = null
      const one = (v: string | string[] | undefined) => (Array.isArray(v) ? (v[0] ?? null) : (v ?? null))
      let head: Dispatcher.ResponseData | null = null
      // The status arrived and then the body failed: below 500 the upstream did answer, and a
      // write reported as "may or may not have happened" would be retried, so written twice.
      const cut = (why: UpstreamFailure): UpstreamOutcome => {
        // Headers that echo the secret are withheld whatever became of the body (cut off, stalled).
        // (Not again when the whole answer was just judged so.)
        const failure =
          !withholds(why) && head && needles.forms.length > 0 && headerEcho(head.headers, needles) !== null
            ? 'credential_echoed'
            : why
        return head && head.statusCode < 500
          ? {
              kind: 'response',
              status: head.statusCode,
              // A withheld answer's headers could hold the secret too: none of them is told.
              contentType: withholds(failure) ? null : one(head.headers['content-type']),
              location: withholds(failure) ? null : one(head.headers.location),
              body: Buffer.alloc(0),
              latencyMs: elapsed(),
              incomplete: failure,
            }
          : { kind: 'failed', failure, sent: true, status, latencyMs: elapsed() }
      }
      // Each timeout bounds one wait; this bounds them all (a byte every 29 s would pass them).
      const deadline = AbortSignal.timeout(settings.deadlineMs)
      try {
        const res = await pool.request({
          method: req.method as 'POST',
          path: req.path,
          headers,
          body: req.body,
          signal: deadline,
        })
        head = res
        status = res.statusCode
        const chunks: Buffer[] = []
        let size = 0
        for await (const chunk of res.body) {
          size += (chunk as Buffer).length
          if (size > settings.maxResponseBytes) {
            res.body.destroy()
            return cut('response_too_large')
          }
          chunks.push(chunk as Buffer)
        }
        const body = Buffer.concat(chunks)
        const withheld = needles.forms.length > 0 ? withheldFor(res.headers, body, needles) : null
        if (withheld) return cut(withheld)
        return {
          kind: 'response',
          status: res.statusCode,
          contentType: one(res.headers['content-type']),
          location: one(res.headers.location),
          body,
          latencyMs: elapsed(),
        }
      } catch (err) {
        const { failure, sent } = deadline.aborted
          ? { failure: 'deadline_exceeded' as const, sent: true }
          : failureOf(err)
        if (head) return cut(failure)
        return { kind: 'failed', failure, sent, status, latencyMs: elapsed() }
      }
    },

    async close() {
      await Promise.all([...pools.values()].map((p) => p.close()))
    },
  }
}
