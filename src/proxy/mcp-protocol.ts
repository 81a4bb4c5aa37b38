import { stageHttpRequest } from '../actions/action-stager.js'
import { JSON_RPC_CODES, JSON_RPC_OTHER } from '../core/errors.js'
import type { CallProtocol, CallRefusal, CallRequest } from './call-protocol.js'
import { type McpCall, mapMcpCall, readMcpRequest } from './mcp-calls.js'
import { offeredTools, toolsListFilter } from './mcp-tools-filter.js'

/**
 * MCP (Streamable HTTP) through gate-proxy: every `tools/call` in a POST is decided; one that
 * is not ALLOW refuses the whole POST (a batch is never forwarded in part). A refusal is a
 * JSON-RPC error for every request of the POST (HTTP 200, application/json, as an MCP server
 * answers), so the agent's SDK rejects the call with it and its framework shows the model why:
 * `data` carries the decision, the reason, the receipt and, for STEP_UP, the action to approve.
 */
export const mcpProtocol: CallProtocol<McpCall> = {
  kind: 'mcp',

  read(req) {
    const r = readMcpRequest(req)
    return r.ok ? { ok: true, calls: r.calls, reads: r.reads.length } : r
  },

  map(system, call) {
    return system.mcp ? mapMcpCall(system.mcp, call) : null
  },

  describe(call) {
    return { mcp: { tool: call.tool } }
  },

  stage(call, calls, f, request) {
    // The approval replays the POST as it was sent (in the agent's session): only when this
    // call is its one write.
    if (calls.length !== 1) return null
    return stageHttpRequest(f, request, { mcp: { tool: call.tool } })
  },

  answerFilter(system) {
    const binding = system.mcp
    if (!binding?.filterToolsList) return null
    return (snap, who, now) => toolsListFilter(offeredTools(snap, binding, who, now))
  },

  render(refusal, calls, req) {
    const error = errorOf(refusal, calls)
    const ids = requestIds(req)
    // No request to answer (a notification alone): the refusal is the HTTP answer itself.
    if (ids === null || ids.length === 0)
      return {
        status: refusal.kind === 'refused' ? refusal.def.status : 403,
        contentType: 'application/json',
        body: JSON.stringify({ jsonrpc: '2.0', id: null, error }),
      }
    const responses = ids.map((id) => ({ jsonrpc: '2.0', id, error }))
    return {
      status: 200,
      contentType: 'application/json',
      body: JSON.stringify(Array.isArray(batchOf(req)) ? responses : responses[0]),
    }
  },
}

function batchOf(req: CallRequest): unknown {
  try {
    return JSON.parse(req.body.toString('utf8'))
  } catch {
    return null
  }
}

/** The ids of the POST's requests (notifications and responses get no answer); null if unreadable. */
function requestIds(req: CallRequest): (string | number)[] | null {
  const r = readMcpRequest(req)
  if (!r.ok) return null
  const ids: (string | number)[] = []
  const json = batchOf(req)
  for (const m of Array.isArray(json) ? json : [json]) {
    const id = (m as { id?: unknown; method?: unknown }).id
    if (
      typeof (m as { method?: unknown }).method === 'string' &&
      (typeof id === 'string' || typeof id === 'number')
    )
      ids.push(id)
  }
  return ids
}

function errorOf(refusal: CallRefusal<McpCall>, calls: readonly McpCall[]) {
  const refusedTools = calls.length > 1 ? { refusedTools: calls.map((c) => c.tool) } : {}
  if (refusal.kind === 'refused') {
    const code = refusal.def.code
    return {
      code: JSON_RPC_CODES[code] ?? JSON_RPC_OTHER,
      message: `writegate: ${refusal.error}`,
      data: {
        code,
        decision: 'DENY',
        reason: code,
        status: refusal.def.status,
        ...(refusal.call ? { tool: refusal.call.tool } : {}),
        ...refusal.detail,
        ...refusedTools,
      },
    }
  }
  const { answer, call } = refusal
  const stepUp = answer.decision === 'STEP_UP'
  const code = stepUp ? 'step_up_required' : 'denied'
  return {
    code: JSON_RPC_CODES[code] as number,
    message: stepUp
      ? answer.actionId === null
        ? `writegate: approval required for ${call.tool}; send it as the request's only tool call to stage it for approval`
        : `writegate: approval required for ${call.tool}; a human must approve action ${answer.actionId}`
      : `writegate: ${call.tool} denied by policy (${answer.outcome.reason})`,
    data: {
      code,
      decision: answer.decision,
      verb: answer.outcome.verb,
      reason: answer.outcome.reason,
      tool: call.tool,
      receiptId: answer.receiptId,
      ...(stepUp ? { actionId: answer.actionId } : {}),
      ...refusedTools,
    },
  }
}
