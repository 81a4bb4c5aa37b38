import type { SystemsRegistry, ToolRef } from '../systems/systems-registry.js'
import { fillTemplate } from './param-template.js'

export type RevertPlan =
  | { kind: 'none' }
  | { kind: 'planned'; ref: ToolRef; params: Record<string, unknown> }
  /** The tool defines an undo, but it cannot be built from this write (a result field is missing, say). */
  | { kind: 'impossible'; tool: string; problem: string }

/**
 * The undo of a tool call that succeeded: the `revert` tool of the same system, with each
 * param filled from its template over the original params and the upstream's JSON answer,
 * and checked against the revert tool's schema like any staged call.
 */
export async function planRevert(
  systems: SystemsRegistry,
  original: ToolRef,
  params: Record<string, unknown>,
  result: unknown,
): Promise<RevertPlan> {
  const revert = original.tool.revert
  if (!revert) return { kind: 'none' }
  const ref = await systems.toolOf(original.system.tenantId, original.system.systemId, revert.tool)
  if (!ref) return { kind: 'impossible', tool: revert.tool, problem: `no tool ${revert.tool} is enrolled` }
  const out: Record<string, unknown> = {}
  for (const [name, template] of Object.entries(revert.params)) {
    const filled = fillTemplate(template, { params, result })
    if (!filled.ok)
      return { kind: 'impossible', tool: revert.tool, problem: `${filled.missing} is missing for ${name}` }
    out[name] = filled.value
  }
  const v = ref.validate(out)
  if (!v.ok)
    return {
      kind: 'impossible',
      tool: revert.tool,
      problem: v.issues.map((i) => `${i.path || '(params)'}: ${i.message}`).join('; '),
    }
  return { kind: 'planned', ref, params: out }
}
