import { X509Certificate } from 'node:crypto'
import { z } from 'zod'
import type {
  CredentialRef,
  SystemDefinition,
  SystemRecord,
  SystemRoute,
  SystemTool,
} from '../core/enrolled-system.js'
import { literal } from '../core/path-pattern.js'
import { routeCovers } from './route-coverage.js'

/**
 * An enrolled system: a fixed upstream origin, the credential writegate injects (a reference,
 * never a value), and the table that maps its writes to verbs. One schema for every way a
 * system arrives: `POST/PUT /v1/systems`, `writegate systems apply`, and the deprecated files.
 */

export const HTTP_METHODS = ['GET', 'HEAD', 'OPTIONS', 'POST', 'PUT', 'PATCH', 'DELETE'] as const
const httpMethod = z.enum(HTTP_METHODS)

/** Per-tenant limits (docs/proxy.md "Limits"): they bound a snapshot's size and the proxy's route walk. */
export const SYSTEM_LIMITS = {
  systemsPerTenant: 100,
  /**
   * The JSON of all of a tenant's systems together. Every change rebuilds and re-sends the
   * tenant's whole snapshot, on the control plane's one event loop: 15 MB of systems held
   * every tenant's requests for 250 ms per change (found in review).
   */
  bytesPerTenant: 4 * 1024 * 1024,
  routesPerSystem: 500,
  toolsPerSystem: 100,
} as const

export const SYSTEM_ID = /^sys_[A-Za-z0-9_-]{1,60}$/

/** `{name}` placeholders in a path pattern or template; a trailing `*` matches any rest. */
const pathPattern = z
  .string()
  .max(1000)
  .regex(/^\/[A-Za-z0-9._~!$&'()+,;=:@%/{}*-]*$/, {
    message: 'expected a path starting with / (placeholders as {name})',
  })

/**
 * A pattern the proxy matches paths against. Two placeholders in one segment (`{a}-{b}`) would
 * be ambiguous, and the regular expression they compile to backtracks polynomially in the
 * segment's length: an agent's crafted path could hold the event loop for seconds.
 */
const matchedPattern = pathPattern.refine((p) => p.split('/').every((seg) => seg.split('{').length <= 2), {
  message: 'a path pattern may hold at most one {placeholder} per segment',
})

/**
 * A route's pattern is matched against paths the proxy has already vetted: it never forwards
 * a `;`, so a route holding one could never match, and `*` means "the rest" only at the end.
 */
const routePattern = matchedPattern
  .refine((p) => !p.includes(';'), {
    message: 'a route path may not contain ; (the proxy refuses such paths)',
  })
  .refine((p) => !p.slice(0, -1).includes('*'), {
    message: 'a route path may use * only as its last character',
  })

const headerName = z.string().regex(/^[A-Za-z0-9-]{1,64}$/, { message: 'expected an HTTP header name' })

/** Where the injecting process finds the secret: the control plane never sees its value. */
export const credentialRefSchema = z
  .object({
    /** Header the upstream expects, e.g. `authorization`. Any copy the agent sends is stripped. */
    header: headerName,
    /** Put before the secret, e.g. `Bearer `. */
    prefix: z
      .string()
      .max(64)
      .regex(/^[\x20-\x7e]*$/, { message: 'expected printable ASCII' })
      .default(''),
    fromEnv: z
      .string()
      .regex(/^[A-Za-z_][A-Za-z0-9_]{0,127}$/, { message: 'expected an environment variable name' })
      .optional(),
    fromFile: z
      .string()
      .min(1)
      .max(4096)
      .refine((p) => p.startsWith('/'), { message: 'expected an absolute path' })
      .optional(),
  })
  .strict()
  .refine((c) => (c.fromEnv === undefined) !== (c.fromFile === undefined), {
    message: 'set exactly one of fromEnv or fromFile',
  })

const verbName = z.string().min(1).max(64)

export const routeSchema = z
  .object({
    method: httpMethod,
    path: routePattern,
    verb: verbName,
    /** Template for the decision target, from path placeholders: `{owner}/{repo}`. */
    target: z.string().max(500).optional(),
  })
  .strict()

export const toolSchema = z
  .object({
    name: z.string().regex(/^[a-z][a-z0-9_.-]{0,63}$/, { message: 'expected a lowercase tool name' }),
    verb: verbName,
    method: httpMethod,
    /** Upstream path; `{param}` placeholders are filled from validated params. */
    pathTemplate: pathPattern,
    /** JSON Schema of the tool's params. */
    params: z.record(z.string(), z.unknown()).default({ type: 'object' }),
    /** Template for the decision target, from params. */
    target: z.string().max(500).optional(),
    /** The undo of this tool: another tool of the same system, with params templated from the params and the result. */
    revert: z
      .object({
        tool: z.string().min(1),
        params: z.record(z.string(), z.string()).default({}),
      })
      .strict()
      .optional(),
  })
  .strict()

/** A fixed origin: scheme, host and optional port; nothing a request could extend. */
export const upstreamSchema = z.string().superRefine((u, ctx) => {
  let url: URL
  try {
    url = new URL(u)
  } catch {
    ctx.addIssue({ code: 'custom', message: 'expected an origin such as https://api.example.com' })
    return
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:')
    ctx.addIssue({ code: 'custom', message: 'expected an https:// or http:// origin' })
  // A URL parser reads `\` as `/` and drops tabs and line breaks: `http://h\admin` is the
  // origin plus a path every write would then go under (found in review).
  else if (!/^https?:\/\/[^/?#\\\s]+\/?$/i.test(u) || url.pathname !== '/' || url.username || url.password)
    ctx.addIssue({
      code: 'custom',
      message: 'expected an origin: scheme, host and port only (no path, query or user)',
    })
})

/** `*` matches any run of characters; nothing else is special. */
const callName = z.string().regex(/^[A-Za-z0-9_.*/:-]{1,128}$/, {
  message: 'expected a name, or a glob with * (letters, digits, _ . / : - and *)',
})

const mcpToolRoute = z
  .object({ name: callName, verb: verbName, target: z.string().max(500).optional() })
  .strict()

const graphqlMutationRoute = z
  .object({
    field: z.string().regex(/^[_A-Za-z*][_0-9A-Za-z*]{0,127}$/, {
      message: 'expected a GraphQL field name, or a glob with *',
    }),
    verb: verbName,
    target: z.string().max(500).optional(),
  })
  .strict()

export const mcpBindingSchema = z
  .object({
    endpoint: matchedPattern.default('/mcp'),
    tools: z.array(mcpToolRoute).max(SYSTEM_LIMITS.routesPerSystem).default([]),
    /** Leave out of tools/list answers the tools whose verb the agent's policy denies, and unmapped ones. */
    filterToolsList: z.boolean().default(false),
  })
  .strict()

export const graphqlBindingSchema = z
  .object({
    endpoint: matchedPattern.default('/graphql'),
    mutations: z.array(graphqlMutationRoute).max(SYSTEM_LIMITS.routesPerSystem).default([]),
  })
  .strict()

/** Everything about a system but its id, tenant and version: what a PUT replaces. */
export const systemDefinitionShape = {
  kind: z.enum(['http', 'mcp', 'graphql']).default('http'),
  /** `kind: mcp`: its Streamable HTTP endpoint and the tool calls mapped to verbs. */
  mcp: mcpBindingSchema.optional(),
  /** `kind: graphql`: its endpoint and the root mutation fields mapped to verbs. */
  graphql: graphqlBindingSchema.optional(),
  upstream: upstreamSchema,
  credential: credentialRefSchema.optional(),
  /** PEM CA certificates to verify an https upstream with, instead of the system trust store. */
  caBundle: z
    .string()
    .max(65_536)
    .regex(/-----BEGIN CERTIFICATE-----[\s\S]+-----END CERTIFICATE-----/, {
      message: 'expected PEM certificates (-----BEGIN CERTIFICATE-----)',
    })
    .optional(),
  /** Agent-side variable the injector sets to this system's base URL through the proxy. */
  baseUrlEnv: z
    .string()
    .regex(/^[A-Z_][A-Z0-9_]{0,127}$/, { message: 'expected an upper-case environment variable name' })
    .optional(),
  /** `pass`: GET, HEAD and OPTIONS go through ungated unless a route names them. `gate`: reads need a route too. */
  reads: z.enum(['pass', 'gate']).default('pass'),
  routes: z.array(routeSchema).max(SYSTEM_LIMITS.routesPerSystem).default([]),
  tools: z.array(toolSchema).max(SYSTEM_LIMITS.toolsPerSystem).default([]),
}

export const systemIdSchema = z
  .string()
  .regex(SYSTEM_ID, { message: 'expected sys_<name> (1-60 of A-Z a-z 0-9 _ -)' })

/** A system as it is enrolled: its id and definition. */
export const systemSchema = z
  .object({ systemId: systemIdSchema, ...systemDefinitionShape })
  .strict()
  .superRefine((s, ctx) => {
    for (const p of definitionProblems(s)) ctx.addIssue({ code: 'custom', path: p.path, message: p.message })
  })

export type SystemInput = z.input<typeof systemSchema>
export type { CredentialRef, SystemDefinition, SystemRecord, SystemRoute, SystemTool }

/** What the schema accepts is what the core's types describe (a compile-time check). */
const _parsedIsDefinition = (d: z.infer<typeof systemSchema>): SystemDefinition => d
void _parsedIsDefinition

export interface DefinitionProblem {
  path: (string | number)[]
  message: string
}

const PLACEHOLDER = /\{([A-Za-z_][A-Za-z0-9_]*)\}/g

function placeholders(text: string): string[] {
  return [...text.matchAll(PLACEHOLDER)].map((m) => m[1] as string)
}

/** `{a.b}` placeholders of a body-aware target template (dotted paths), none for no template. */
function placeholdersIn(text: string | undefined): string[] {
  return text === undefined ? [] : [...text.matchAll(/\{([^{}]*)\}/g)].map((m) => m[1] as string)
}

/** `/a/{x}/` and `/A/{y}` are one route to the matcher (case-insensitive, one trailing slash, placeholders alike). */
function routeShape(method: string, path: string): string {
  let p = path.endsWith('*') ? path.slice(0, -1) : path
  if (p.endsWith('/')) p = p.slice(0, -1)
  // Literal text with its escapes decoded, as routes match (`%40me` is `@me`); a placeholder as
  // a character no literal holds.
  const shape = p
    .split(/\{[A-Za-z_][A-Za-z0-9_]*\}/)
    .map((part) => literal(part).toLowerCase())
    .join('\u0000')
  return `${method} ${shape}${path.endsWith('*') ? '*' : ''}`
}

/**
 * What zod's field rules cannot see: a target naming a placeholder its path does not define
 * (it would be decided under the literal text, for every write), two routes that match the
 * same requests or a route whose every request an earlier one matches (it could never decide), tool names used twice, and undo tools that
 * do not exist.
 */
export function definitionProblems(
  s: Pick<SystemDefinition, 'routes' | 'tools'> &
    Partial<Pick<SystemDefinition, 'kind' | 'mcp' | 'graphql' | 'upstream' | 'caBundle'>>,
): DefinitionProblem[] {
  const problems: DefinitionProblem[] = []
  if (s.caBundle !== undefined && s.upstream !== undefined && !/^https:/i.test(s.upstream))
    problems.push({ path: ['caBundle'], message: 'only for an https:// upstream' })
  if (s.caBundle !== undefined) {
    const unreadable = unreadableCertificate(s.caBundle)
    if (unreadable !== null) problems.push({ path: ['caBundle'], message: unreadable })
  }
  const kind = s.kind ?? 'http'
  if (kind === 'mcp' && !s.mcp) problems.push({ path: ['mcp'], message: 'required for kind: mcp' })
  if (kind === 'graphql' && !s.graphql)
    problems.push({ path: ['graphql'], message: 'required for kind: graphql' })
  if (kind !== 'mcp' && s.mcp) problems.push({ path: ['mcp'], message: 'only for kind: mcp' })
  if (kind !== 'graphql' && s.graphql) problems.push({ path: ['graphql'], message: 'only for kind: graphql' })
  s.mcp?.tools.forEach((r, i) => {
    for (const p of placeholdersIn(r.target))
      if (p !== 'arguments' && !p.startsWith('arguments.'))
        problems.push({
          path: ['mcp', 'tools', i, 'target'],
          message: `placeholder {${p}} is not over the call's arguments ({arguments.…})`,
        })
  })
  s.graphql?.mutations.forEach((r, i) => {
    for (const p of placeholdersIn(r.target))
      if (!/^[_A-Za-z][_0-9A-Za-z]*(\.[_A-Za-z][_0-9A-Za-z]*)*$/.test(p))
        problems.push({
          path: ['graphql', 'mutations', i, 'target'],
          message: `placeholder {${p}} is not an argument path (name or name.field)`,
        })
  })
  const seenCalls = new Set<string>()
  s.mcp?.tools.forEach((r, i) => {
    if (seenCalls.has(r.name))
      problems.push({ path: ['mcp', 'tools', i, 'name'], message: `duplicate tool route ${r.name}` })
    seenCalls.add(r.name)
  })
  seenCalls.clear()
  s.graphql?.mutations.forEach((r, i) => {
    if (seenCalls.has(r.field))
      problems.push({
        path: ['graphql', 'mutations', i, 'field'],
        message: `duplicate mutation route ${r.field}`,
      })
    seenCalls.add(r.field)
  })
  const seen = new Map<string, number>()
  s.routes.forEach((r, i) => {
    const defined = new Set(placeholders(r.path))
    if (r.target !== undefined) {
      const unknown = placeholders(r.target).filter((n) => !defined.has(n))
      if (unknown.length > 0)
        problems.push({
          path: ['routes', i, 'target'],
          message: `placeholder {${unknown[0]}} is not defined by the path ${r.path}`,
        })
    }
    const shape = routeShape(r.method, r.path)
    const first = seen.get(shape)
    if (first !== undefined) {
      problems.push({
        path: ['routes', i],
        message: `duplicate route: ${r.method} ${r.path} matches what routes.${first} matches`,
      })
      return
    }
    seen.set(shape, i)
    const before = s.routes.findIndex((e, j) => j < i && e.method === r.method && routeCovers(e.path, r.path))
    if (before !== -1)
      problems.push({
        path: ['routes', i],
        message: `never decides: every ${r.method} ${r.path} is matched first by routes.${before} (${s.routes[before]?.path}); list the narrower route first`,
      })
  })
  const tools = new Set<string>()
  s.tools.forEach((t, j) => {
    if (tools.has(t.name)) problems.push({ path: ['tools', j, 'name'], message: `duplicate tool ${t.name}` })
    tools.add(t.name)
  })
  s.tools.forEach((t, j) => {
    if (t.revert && !tools.has(t.revert.tool))
      problems.push({
        path: ['tools', j, 'revert', 'tool'],
        message: `no tool ${t.revert.tool} in this system`,
      })
  })
  return problems
}

/** The verbs a definition names, so the service can check them against the tenant's vocabulary. */
export function verbsOf(
  s: Pick<SystemDefinition, 'routes' | 'tools'> & Partial<Pick<SystemDefinition, 'mcp' | 'graphql'>>,
): { path: (string | number)[]; verb: string }[] {
  return [
    ...s.routes.map((r, i) => ({ path: ['routes', i, 'verb'], verb: r.verb })),
    ...s.tools.map((t, j) => ({ path: ['tools', j, 'verb'], verb: t.verb })),
    ...(s.mcp?.tools ?? []).map((r, i) => ({ path: ['mcp', 'tools', i, 'verb'], verb: r.verb })),
    ...(s.graphql?.mutations ?? []).map((r, i) => ({
      path: ['graphql', 'mutations', i, 'verb'],
      verb: r.verb,
    })),
  ]
}

/**
 * Which certificate of a PEM bundle does not parse (X.509, by Node's crypto), or null: one that
 * does not was enrolled, and every write to the system then failed as if sent (found in review).
 */
function unreadableCertificate(bundle: string): string | null {
  const blocks = bundle.match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g) ?? []
  for (let i = 0; i < blocks.length; i++)
    try {
      new X509Certificate(blocks[i] as string)
    } catch {
      return `certificate ${i + 1} of the bundle is not a readable X.509 certificate`
    }
  return null
}
