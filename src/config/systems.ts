import { existsSync, readFileSync } from 'node:fs'
import { parse as parseYaml } from 'yaml'
import { z } from 'zod'
import { ConfigError } from './load.js'

/**
 * Enrolled systems: one file format shared by the gate-proxy's route table, the control
 * plane's /v1/execute and agent actions, and the Kubernetes injector. Upstream origins are
 * fixed here and never taken from a request.
 */

const HTTP_METHOD = z.enum(['GET', 'HEAD', 'OPTIONS', 'POST', 'PUT', 'PATCH', 'DELETE'])

/** `{name}` placeholders in a path pattern or template; a trailing `*` matches any rest. */
const pathPattern = z.string().regex(/^\/[A-Za-z0-9._~!$&'()+,;=:@%/{}*-]*$/, {
  message: 'expected a path starting with / (placeholders as {name})',
})

/**
 * A route's pattern is matched against paths the proxy has already vetted: it never forwards
 * a `;`, so a route holding one could never match, and `*` means "the rest" only at the end.
 */
const routePattern = pathPattern
  .refine((p) => !p.includes(';'), {
    message: 'a route path may not contain ; (the proxy refuses such paths)',
  })
  .refine((p) => !p.slice(0, -1).includes('*'), {
    message: 'a route path may use * only as its last character',
  })

const headerName = z.string().regex(/^[A-Za-z0-9-]+$/, { message: 'expected an HTTP header name' })

const credential = z
  .object({
    /** Header the upstream expects, e.g. `authorization`. Any copy the agent sends is stripped. */
    header: headerName,
    /** Put before the secret, e.g. `Bearer `. */
    prefix: z.string().default(''),
    fromEnv: z
      .string()
      .regex(/^[A-Za-z_][A-Za-z0-9_]*$/)
      .optional(),
    fromFile: z.string().min(1).optional(),
  })
  .strict()
  .refine((c) => (c.fromEnv === undefined) !== (c.fromFile === undefined), {
    message: 'set exactly one of fromEnv or fromFile',
  })

const route = z
  .object({
    method: HTTP_METHOD,
    path: routePattern,
    verb: z.string().min(1).max(64),
    /** Template for the decision target, from path placeholders: `{owner}/{repo}`. */
    target: z.string().max(500).optional(),
  })
  .strict()

const tool = z
  .object({
    name: z.string().regex(/^[a-z][a-z0-9_.-]{0,63}$/, { message: 'expected a lowercase tool name' }),
    verb: z.string().min(1).max(64),
    method: HTTP_METHOD,
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

export const systemSchema = z
  .object({
    systemId: z.string().regex(/^sys_[A-Za-z0-9_-]{1,60}$/, { message: 'expected sys_<name>' }),
    /**
     * Required by the control plane (execute, actions). When set, a proxy whose key belongs to
     * another tenant treats the system as not enrolled (403 not_enrolled, never forwarded).
     */
    tenantId: z
      .string()
      .regex(/^ten_[A-Za-z0-9]+$/)
      .optional(),
    upstream: z
      .url({ protocol: /^https?$/ })
      .refine((u) => new URL(u).pathname === '/' && !new URL(u).search && !new URL(u).username, {
        message: 'expected an origin: scheme, host and port only',
      }),
    credential: credential.optional(),
    /** Agent-side variable the injector sets to this system's base URL through the proxy. */
    baseUrlEnv: z
      .string()
      .regex(/^[A-Z_][A-Z0-9_]*$/)
      .optional(),
    /** `pass`: GET, HEAD and OPTIONS go through ungated unless a route names them. `gate`: reads need a route too. */
    reads: z.enum(['pass', 'gate']).default('pass'),
    routes: z.array(route).default([]),
    tools: z.array(tool).default([]),
  })
  .strict()

export const systemsFileSchema = z
  .object({
    systems: z.array(systemSchema).default([]),
    /** Hosts a CONNECT tunnel may reach. Tunnels are opaque: traffic through them is NOT gated. */
    passthrough: z.array(z.string().regex(/^[A-Za-z0-9.-]+(:\d+)?$/)).default([]),
  })
  .strict()
  .superRefine((f, ctx) => {
    const seen = new Set<string>()
    f.systems.forEach((s, i) => {
      if (seen.has(s.systemId))
        ctx.addIssue({
          code: 'custom',
          path: ['systems', i, 'systemId'],
          message: `duplicate systemId ${s.systemId}`,
        })
      seen.add(s.systemId)
      const tools = new Set(s.tools.map((t) => t.name))
      s.tools.forEach((t, j) => {
        if (t.revert && !tools.has(t.revert.tool)) {
          ctx.addIssue({
            code: 'custom',
            path: ['systems', i, 'tools', j, 'revert', 'tool'],
            message: `no tool ${t.revert.tool} in ${s.systemId}`,
          })
        }
      })
    })
  })

export type SystemsFile = z.infer<typeof systemsFileSchema>
export type EnrolledSystem = z.infer<typeof systemSchema>
export type SystemRoute = z.infer<typeof route>
export type SystemTool = z.infer<typeof tool>

/** Reads and validates a systems file; a problem stops start-up with one line naming it. */
export function loadSystemsFile(path: string, settingName = 'systemsFile'): SystemsFile {
  if (!existsSync(path)) throw new ConfigError(`invalid setting ${settingName}: file ${path} does not exist`)
  let raw: unknown
  try {
    raw = parseYaml(readFileSync(path, 'utf8')) ?? {}
  } catch (err) {
    throw new ConfigError(`invalid systems file ${path}: ${(err as Error).message.split('\n')[0]}`)
  }
  const r = systemsFileSchema.safeParse(raw)
  if (!r.success) {
    const issue = r.error.issues[0]
    const where = issue?.path.map(String).join('.') || '(root)'
    throw new ConfigError(`invalid systems file ${path}: ${where}: ${issue?.message ?? 'invalid'}`)
  }
  return r.data
}

/** The injected credential's value, read at start-up; never logged or returned by any API. */
export function readCredential(
  c: NonNullable<EnrolledSystem['credential']>,
  env: NodeJS.ProcessEnv = process.env,
): string {
  if (c.fromEnv !== undefined) {
    const v = env[c.fromEnv]
    if (v === undefined || v === '')
      throw new ConfigError(`invalid credential: environment variable ${c.fromEnv} is not set`)
    return c.prefix + v
  }
  try {
    return c.prefix + readFileSync(c.fromFile as string, 'utf8').trim()
  } catch (err) {
    throw new ConfigError(
      `invalid credential: cannot read ${c.fromFile}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
    )
  }
}
