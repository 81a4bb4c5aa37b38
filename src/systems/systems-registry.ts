import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv'
import { ConfigError } from '../config/load.js'
import type { EnrolledSystem, SystemsFile, SystemTool } from '../config/systems.js'
import { compileRoutes, type RouteMatch, type RouteMatcher } from './route-matcher.js'

export interface ParamIssue {
  path: string
  message: string
}

export interface ToolRef {
  system: EnrolledSystem
  tool: SystemTool
  /** Checks params against the tool's JSON Schema. */
  validate(params: unknown): { ok: true } | { ok: false; issues: ParamIssue[] }
}

/** The control plane's enrolled systems, by tenant: lookups for execute, checks and actions. */
export interface SystemsRegistry {
  system(tenantId: string, systemId: string): EnrolledSystem | null
  tool(tenantId: string, name: string): ToolRef | null
  toolOf(tenantId: string, systemId: string, name: string): ToolRef | null
  /** The verb (and target) the system's route table maps a request to, or null when no route does. */
  route(tenantId: string, systemId: string, method: string, path: string): RouteMatch | null
  all(): readonly EnrolledSystem[]
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

/** Compiles every tool's params schema once at start-up; a bad schema stops start-up. */
export function createSystemsRegistry(file: SystemsFile): SystemsRegistry {
  const ajv = new Ajv({ allErrors: true, strict: false })
  const tools = new Map<string, ToolRef>()
  const systems = new Map<string, EnrolledSystem>()
  const routes = new Map<string, RouteMatcher>()
  for (const system of file.systems) {
    systems.set(system.systemId, system)
    routes.set(system.systemId, compileRoutes(system.routes))
    for (const tool of system.tools) {
      let validate: ValidateFunction
      try {
        validate = ajv.compile(tool.params)
      } catch (err) {
        throw new ConfigError(
          `invalid systems file: ${system.systemId} tool ${tool.name}: params is not a valid JSON Schema: ${(err as Error).message.split('\n')[0]}`,
        )
      }
      const ref: ToolRef = {
        system,
        tool,
        validate(params) {
          return validate(params) ? { ok: true } : { ok: false, issues: issuesOf(validate.errors) }
        },
      }
      const key = `${system.tenantId ?? ''}:${tool.name}`
      if (tools.has(key))
        throw new ConfigError(
          `invalid systems file: tool ${tool.name} is defined twice for tenant ${system.tenantId ?? '(none)'}`,
        )
      tools.set(key, ref)
    }
  }
  const owned = (s: EnrolledSystem | undefined, tenantId: string) => (s && s.tenantId === tenantId ? s : null)
  return {
    system: (tenantId, systemId) => owned(systems.get(systemId), tenantId),
    tool: (tenantId, name) => tools.get(`${tenantId}:${name}`) ?? null,
    toolOf(tenantId, systemId, name) {
      const ref = tools.get(`${tenantId}:${name}`)
      return ref && ref.system.systemId === systemId ? ref : null
    },
    route(tenantId, systemId, method, path) {
      if (!owned(systems.get(systemId), tenantId)) return null
      return routes.get(systemId)?.match(method, path) ?? null
    },
    all: () => file.systems,
  }
}
