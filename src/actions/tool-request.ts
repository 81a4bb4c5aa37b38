import type { SystemTool } from '../core/enrolled-system.js'
import { checkUpstreamPath, fillPathTemplate } from '../execute/upstream-url.js'
import { bodyCarriesMethodOverride } from '../systems/method-override-query.js'

export interface ToolRequest {
  method: string
  path: string
  /** The params left after the path placeholders, sent as the JSON body; undefined when none. */
  body: Record<string, unknown> | undefined
}

export type BuiltRequest = ({ ok: true } & ToolRequest) | { ok: false; problem: string }

/** Query values: RFC 3986 unreserved characters stay, everything else (the quote included) is escaped. */
function queryEncode(s: string): string {
  return encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)
}

/**
 * The upstream request of a tool call: `pathTemplate` filled from params (each value one
 * URL-encoded segment); the rest of the params as the JSON body, or, for GET and HEAD, as
 * the query string (keys sorted, non-text values as JSON).
 */
export function toolRequest(tool: SystemTool, params: Record<string, unknown>): BuiltRequest {
  const filled = fillPathTemplate(tool.pathTemplate, params)
  if (!filled.ok) return filled
  const rest: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(params)) if (!filled.used.has(k) && v !== undefined) rest[k] = v
  let path = filled.path
  let body: Record<string, unknown> | undefined
  if (tool.method === 'GET' || tool.method === 'HEAD') {
    const pairs = Object.keys(rest)
      .sort()
      .map((k) => {
        const v = rest[k]
        return `${queryEncode(k)}=${queryEncode(typeof v === 'string' ? v : JSON.stringify(v))}`
      })
    if (pairs.length > 0) path += `${path.includes('?') ? '&' : '?'}${pairs.join('&')}`
  } else if (Object.keys(rest).length > 0) {
    body = rest
  }
  const verdict = checkUpstreamPath(path)
  if (!verdict.ok) return { ok: false, problem: `the tool's path is unsafe: ${verdict.problem}` }
  if (bodyCarriesMethodOverride(body))
    return { ok: false, problem: "the tool's body has a _method member (a method override)" }
  return { ok: true, method: tool.method, path, body }
}
