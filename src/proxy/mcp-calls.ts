import { fillText } from '../actions/param-template.js'
import type { McpBinding } from '../core/enrolled-system.js'
import { jsonAmbiguity } from '../core/json-ambiguity.js'
import { MAX_JSON_DEPTH, nestedDeeperThan } from '../core/json-depth.js'
import { unstorableStrings } from '../core/storable-json.js'
import { globMatcher } from './call-glob.js'
import { callMediaType, NOT_UTF8, READ_OTHERWISE, utf8Text } from './call-media-type.js'
import { caseVariantOf } from './member-case.js'

/** One `tools/call` an MCP request would make: what the gate decides. */
export interface McpCall {
  /** The JSON-RPC id the agent gave it: its refusal answers under this id. */
  id: string | number
  tool: string
  arguments: Record<string, unknown>
}

/** A JSON-RPC request that is not a tool call (initialize, tools/list, …): passed per the read policy. */
export interface McpRead {
  id: string | number | null
  method: string | null
}

export type McpRequest =
  | { ok: true; calls: McpCall[]; reads: McpRead[]; batch: boolean }
  | { ok: false; problem: string }

/** Batches were in the 2025-03-26 transport and are still sent; a batch this long is no agent's. */
const MAX_BATCH = 32

function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v)
}

function isId(v: unknown): v is string | number {
  return typeof v === 'string' || (typeof v === 'number' && Number.isFinite(v))
}

/**
 * The messages of a Streamable HTTP POST (MCP 2025-06-18): one JSON-RPC 2.0 message, or a
 * batch of them. `tools/call` requests are writes; every other request, notification or
 * response is a read (MCP servers write through tools). Anything the gate cannot read as
 * JSON-RPC is refused rather than guessed at, and a tools/call without a tool name or with
 * arguments that are not an object is unreadable too (a server would reject it; the gate
 * must not pass what it did not decide).
 */
export function readMcpRequest(req: { contentType: string; body: Buffer }): McpRequest {
  const media = callMediaType(req.contentType)
  if ('problem' in media) return { ok: false, problem: media.problem }
  if (!/^application\/(?:[\w.+-]+\+)?json$/.test(media.essence))
    return { ok: false, problem: 'an MCP message is sent as application/json' }
  const text = utf8Text(req.body)
  if (text === null) return { ok: false, problem: NOT_UTF8 }
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch {
    return { ok: false, problem: 'the body is not JSON' }
  }
  // Arguments are templated into targets and staged: past this, reading them could exhaust the stack.
  if (nestedDeeperThan(json))
    return { ok: false, problem: `the message nests deeper than ${MAX_JSON_DEPTH} levels` }
  const ambiguity = jsonAmbiguity(text, { goCase: true })
  if (ambiguity !== null) return { ok: false, problem: `${ambiguity}: ${READ_OTHERWISE}` }
  const batch = Array.isArray(json)
  const messages = batch ? (json as unknown[]) : [json]
  if (messages.length === 0 || messages.length > MAX_BATCH)
    return { ok: false, problem: `a batch holds 1 to ${MAX_BATCH} messages` }
  const calls: McpCall[] = []
  const reads: McpRead[] = []
  for (const m of messages) {
    if (!isObject(m) || m.jsonrpc !== '2.0') return { ok: false, problem: 'not a JSON-RPC 2.0 message' }
    const variant = caseVariantOf(m, MESSAGE_MEMBERS)
    if (variant !== null)
      return { ok: false, problem: `member ${variant} differs from a JSON-RPC member only by case` }
    if (typeof m.method === 'string') {
      const hasId = 'id' in m
      if (hasId && !isId(m.id)) return { ok: false, problem: 'a request id must be a string or a number' }
      if (m.method !== 'tools/call') {
        reads.push({ id: hasId ? (m.id as string | number) : null, method: m.method })
        continue
      }
      if (!hasId) return { ok: false, problem: 'tools/call sent as a notification (no id)' }
      const params = m.params
      if (!isObject(params) || typeof params.name !== 'string' || params.name === '')
        return { ok: false, problem: 'tools/call without a tool name' }
      const paramVariant = caseVariantOf(params, CALL_PARAMS)
      if (paramVariant !== null)
        return {
          ok: false,
          problem: `tools/call param ${paramVariant} differs from name or arguments only by case`,
        }
      if (params.arguments !== undefined && !isObject(params.arguments))
        return { ok: false, problem: 'tools/call arguments must be an object' }
      // Its name and arguments go into its receipt (a target read off them): one Postgres
      // cannot store would be forwarded and never logged (found in review).
      const unstorable = unstorableStrings({ name: params.name, arguments: params.arguments ?? {} })
      if (unstorable !== null) return { ok: false, problem: `tools/call ${unstorable}` }
      calls.push({
        id: m.id as string | number,
        tool: params.name,
        arguments: (params.arguments as Record<string, unknown> | undefined) ?? {},
      })
    } else if ('result' in m || 'error' in m) {
      // The client answering a server's request (sampling, elicitation): no write of its own.
      reads.push({ id: null, method: null })
    } else return { ok: false, problem: 'a JSON-RPC message with neither method nor result' }
  }
  return { ok: true, calls, reads, batch }
}

const MESSAGE_MEMBERS: ReadonlySet<string> = new Set(['jsonrpc', 'method', 'params', 'id', 'result', 'error'])
const CALL_PARAMS: ReadonlySet<string> = new Set(['name', 'arguments'])

/** The verb (and target) a system maps a tool call to: the first tool route whose name (or glob) matches. */
export function mapMcpCall(
  binding: McpBinding,
  call: McpCall,
): { verb: string; target: string | null } | null {
  for (const r of binding.tools) {
    if (!globMatcher(r.name)(call.tool)) continue
    return {
      verb: r.verb,
      target: r.target === undefined ? null : fillText(r.target, { params: { arguments: call.arguments } }),
    }
  }
  return null
}

/** The verb the first tool route matching `tool` maps it to; null when no route maps it. */
export function toolVerb(binding: McpBinding, tool: string): string | null {
  for (const r of binding.tools) if (globMatcher(r.name)(tool)) return r.verb
  return null
}
