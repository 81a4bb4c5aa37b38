import type { ErrorObject, ValidateFunction } from 'ajv'
import { callProtocolOf } from '../core/call-protocol.js'
import type { SystemRecord, SystemTool } from '../core/enrolled-system.js'
import { ERRORS, fail } from '../core/errors.js'
import type { RouteMatch } from '../core/route-matcher.js'
import type { CompiledSnapshot } from '../core/snapshot.js'
import type { SnapshotCache } from '../gate/snapshot-cache.js'
import { createParamsAjv } from './params-schema.js'
import { paramsSchemaShapeProblem } from './params-schema-shape.js'

export interface ParamIssue {
  path: string
  message: string
}

export interface ToolRef {
  system: SystemRecord
  tool: SystemTool
  /** Checks params against the tool's JSON Schema. */
  validate(params: unknown): { ok: true } | { ok: false; issues: ParamIssue[] }
}

/**
 * The control plane's view of a tenant's enrolled systems, read from the tenant's decision
 * snapshot (the same systems its proxies serve), for execute, checks and actions. Without a
 * snapshot nothing can be looked up: 503 gate_unavailable, never a guess.
 */
/** A request's route, or the calls of a body-aware endpoint (see SystemsRegistry.route). */
export type RequestMapping = RouteMatch | { calls: 'mcp' | 'graphql' }

export interface SystemsRegistry {
  system(tenantId: string, systemId: string): Promise<SystemRecord | null>
  tool(tenantId: string, name: string): Promise<ToolRef | null>
  toolOf(tenantId: string, systemId: string, name: string): Promise<ToolRef | null>
  /**
   * How the system maps a request, as gate-proxy would: the verb (and target) of its route; the
   * protocol of the calls in its body when it goes to an MCP or GraphQL endpoint (each call is
   * decided on its own, whatever route also matches the path); null when nothing maps it.
   */
  route(tenantId: string, systemId: string, method: string, path: string): Promise<RequestMapping | null>
}

function issuesOf(errors: ErrorObject[] | null | undefined): ParamIssue[] {
  return (errors ?? []).map((e) => ({
    path: e.instancePath.replace(/^\//, '').replace(/\//g, '.'),
    message:
      e.keyword === 'additionalProperties'
        ? `unknown key ${(e.params as { additionalProperty?: string }).additionalProperty}`
        : (e.message ?? 'invalid'),
  }))
}

/** Compiled tool schemas kept across snapshots: one per version of a system. */
const VALIDATORS_KEPT = 1024

export function createSystemsRegistry(deps: { snapshots: SnapshotCache }): SystemsRegistry {
  const ajv = createParamsAjv()
  const validators = new Map<string, ValidateFunction | Error>()

  async function snapshot(tenantId: string): Promise<CompiledSnapshot> {
    const snap = await deps.snapshots.get(tenantId).catch(() => null)
    if (!snap) fail(ERRORS.gateUnavailable, { reason: 'gate_unavailable' })
    return snap
  }

  function refOf(system: SystemRecord, tool: SystemTool): ToolRef {
    const key = `${system.tenantId}/${system.systemId}@${system.version}:${tool.name}`
    let v = validators.get(key)
    if (!v) {
      try {
        // Enrolment refuses these shapes; one stored before it did validates nothing either.
        const problem = paramsSchemaShapeProblem(tool.params, { stored: true })
        v = problem === null ? ajv.compile(tool.params) : new Error(problem)
      } catch (err) {
        // Enrolment refuses schemas ajv cannot compile; one that got in anyway validates nothing.
        v = err as Error
      }
      if (validators.size >= VALIDATORS_KEPT) validators.delete(validators.keys().next().value as string)
      validators.set(key, v)
    }
    const validate = v
    return {
      system,
      tool,
      validate(params) {
        if (validate instanceof Error)
          return {
            ok: false,
            issues: [{ path: '', message: `the tool's params schema is invalid: ${validate.message}` }],
          }
        return validate(params) ? { ok: true } : { ok: false, issues: issuesOf(validate.errors) }
      },
    }
  }

  return {
    async system(tenantId, systemId) {
      return (await snapshot(tenantId)).system(systemId)?.record ?? null
    },
    async tool(tenantId, name) {
      for (const s of (await snapshot(tenantId)).systems()) {
        const tool = s.record.tools.find((t) => t.name === name)
        if (tool) return refOf(s.record, tool)
      }
      return null
    },
    async toolOf(tenantId, systemId, name) {
      const s = (await snapshot(tenantId)).system(systemId)
      const tool = s?.record.tools.find((t) => t.name === name)
      return s && tool ? refOf(s.record, tool) : null
    },
    async route(tenantId, systemId, method, path) {
      const compiled = (await snapshot(tenantId)).system(systemId)
      if (!compiled) return null
      const calls = callProtocolOf(compiled, method, path)
      if (calls) return { calls }
      return compiled.routes.match(method, path)
    },
  }
}

/** Whether ajv can compile a tool's params schema: enrolment refuses one it cannot (400, naming the tool). */
export function paramsSchemaProblem(schema: Record<string, unknown>): string | null {
  const problem = paramsSchemaShapeProblem(schema)
  if (problem !== null) return problem
  try {
    createParamsAjv().compile(schema)
    return null
  } catch (err) {
    // ajv compiles a `$ref` cycle that never reaches a keyword by recursing until the stack ends.
    if (err instanceof RangeError) return 'a $ref refers back to itself without reaching a schema'
    return (err as Error).message.split('\n')[0] ?? 'invalid JSON Schema'
  }
}
