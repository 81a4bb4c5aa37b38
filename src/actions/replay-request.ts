import { sha256Hex } from '../core/secret-hash.js'
import { UPSTREAM_METHODS } from '../execute/execute-service.js'
import { checkUpstreamPath } from '../execute/upstream-url.js'
import { HTTP_REPLAY_TOOL, type HttpReplayParams, REPLAYED_HEADERS } from './staged-request.js'

export { HTTP_REPLAY_TOOL }

export interface ReplayRequest {
  method: string
  path: string
  bytes: Buffer
  contentType: string | null
  /** Protocol headers the agent sent with it (REPLAYED_HEADERS only). */
  headers: Record<string, string>
}

export type BuiltReplay = ({ ok: true } & ReplayRequest) | { ok: false; problem: string }

/** Printable ASCII only: it becomes a header again. */
const CONTENT_TYPE = /^[\x20-\x7e]{1,255}$/

/**
 * The exact request a proxy-staged action (tool `@http`) replays on approval, read back from
 * its params and checked: a known method, a safe path, a body whose digest still matches what
 * the ACTION_STAGED receipt recorded, and a body the proxy actually captured.
 */
export function replayRequest(params: Record<string, unknown>): BuiltReplay {
  const p = params as Partial<HttpReplayParams> & { bodyCaptured?: unknown }
  const bad = (problem: string): BuiltReplay => ({ ok: false, problem })
  if (typeof p.method !== 'string' || !(UPSTREAM_METHODS as readonly string[]).includes(p.method))
    return bad('the staged request has no valid method')
  if (typeof p.path !== 'string') return bad('the staged request has no path')
  const verdict = checkUpstreamPath(p.path, '/')
  if (!verdict.ok) return bad(`the staged path is unsafe: ${verdict.problem}`)
  if (p.contentType !== null && (typeof p.contentType !== 'string' || !CONTENT_TYPE.test(p.contentType)))
    return bad('the staged content type is not a valid header value')
  if (p.bodyCaptured === false) return bad('the proxy did not capture the body, so it cannot be replayed')
  if (typeof p.body !== 'string' || !/^[A-Za-z0-9+/]*={0,2}$/.test(p.body))
    return bad('the staged body is not base64')
  const bytes = Buffer.from(p.body, 'base64')
  if (typeof p.bodySha256 !== 'string' || sha256Hex(bytes) !== p.bodySha256)
    return bad('the staged body does not match its recorded digest')
  const headers: Record<string, string> = {}
  if (p.headers !== undefined) {
    if (p.headers === null || typeof p.headers !== 'object')
      return bad('the staged headers are not an object')
    for (const [name, value] of Object.entries(p.headers)) {
      if (!(REPLAYED_HEADERS as readonly string[]).includes(name))
        return bad(`the staged header ${name} is not one a replay may send`)
      if (typeof value !== 'string' || !CONTENT_TYPE.test(value))
        return bad(`the staged header ${name} is not a valid header value`)
      headers[name] = value
    }
  }
  return { ok: true, method: p.method, path: p.path, bytes, contentType: p.contentType ?? null, headers }
}
