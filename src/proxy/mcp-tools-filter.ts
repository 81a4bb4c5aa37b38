import type { McpBinding } from '../core/enrolled-system.js'
import { evaluate, mayAttempt } from '../core/evaluate.js'
import type { CompiledSnapshot } from '../core/snapshot.js'
import type { Environment } from '../core/verbs.js'
import { toolVerb } from './mcp-calls.js'

/** A JSON-RPC message rewritten on its way back to the agent; undefined when it is left as it was. */
export type MessageRewrite = (message: unknown) => unknown

function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v)
}

/**
 * Which tools a key is offered under a snapshot (`filterToolsList`): a tool no route maps would
 * be refused (`unmapped_call`), and one whose verb the key's policy denies (or whose key is
 * barred) would be DENY, so neither is offered. STEP_UP and require_grant tools stay: a human
 * or a grant can let them through. A pure evaluation, as a tools/call would get it before its
 * commit: nothing is committed, counted or receipted.
 */
export function offeredTools(
  snap: CompiledSnapshot,
  binding: McpBinding,
  who: { keyId: string; environment: Environment | null },
  nowSeconds: number,
): (tool: string) => boolean {
  const byVerb = new Map<string, boolean>()
  return (tool) => {
    const verb = toolVerb(binding, tool)
    if (verb === null) return false
    let offered = byVerb.get(verb)
    if (offered === undefined) {
      const e = evaluate(
        snap,
        { keyId: who.keyId, verb, target: null, environment: who.environment, grantId: null },
        nowSeconds,
      )
      offered = mayAttempt(e)
      byVerb.set(verb, offered)
    }
    return offered
  }
}

/**
 * Leaves out of every `tools/list` result (a response whose `result.tools` is a list) the
 * tools not offered. Matched by shape, not by request id, so a result replayed on a resumed
 * stream (GET with Last-Event-ID) is filtered too. An entry that is not a tool with a name is
 * left out as well: what cannot be judged is not offered.
 */
export function toolsListFilter(offered: (tool: string) => boolean): MessageRewrite {
  return (m) => {
    if (!isObject(m) || !isObject(m.result) || !Array.isArray(m.result.tools)) return undefined
    const tools = m.result.tools as unknown[]
    const kept = tools.filter((t) => isObject(t) && typeof t.name === 'string' && offered(t.name))
    if (kept.length === tools.length) return undefined
    return { ...m, result: { ...m.result, tools: kept } }
  }
}

/** A JSON-RPC payload (one message or a batch) rewritten message by message; undefined if unchanged. */
export function rewritePayload(payload: unknown, rewrite: MessageRewrite): unknown {
  if (!Array.isArray(payload)) return rewrite(payload)
  let changed = false
  const out = payload.map((m) => {
    const r = rewrite(m)
    if (r === undefined) return m
    changed = true
    return r
  })
  return changed ? out : undefined
}
