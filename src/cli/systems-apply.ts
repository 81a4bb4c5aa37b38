import { readFileSync } from 'node:fs'
import { stringify } from 'yaml'
import { z } from 'zod'
import { ConfigError } from '../config/load.js'
import { loadSystemsFile } from '../config/systems.js'
import { canonicalJson } from '../core/jcs.js'
import {
  type SystemDefinition,
  systemDefinitionShape,
  systemIdSchema,
  systemSchema,
} from '../systems/system-definition.js'
import { UsageError } from './arguments.js'
import type { CommandIo } from './commands.js'

/** Where the control plane is, and the admin key that may change its systems. */
export interface ApiTarget {
  url: string
  apiKey: string
}

interface Enrolled extends SystemDefinition {
  version: number
}

/** `--url`, else WRITEGATE_URL, else the quick start's; `--api-key-file`, else WRITEGATE_API_KEY. */
export function apiTarget(options: Record<string, string | undefined>, env: NodeJS.ProcessEnv): ApiTarget {
  const url = options.url ?? env.WRITEGATE_URL ?? 'http://127.0.0.1:8080'
  // Never echoed: a URL may carry a password, which every later message would print.
  let parsed: URL
  try {
    parsed = new URL(url)
  } catch {
    throw new UsageError('--url (or WRITEGATE_URL): not a URL')
  }
  if (parsed.username || parsed.password)
    throw new UsageError(
      '--url (or WRITEGATE_URL): must not carry credentials (user:password@); the API key is the credential',
    )
  let apiKey: string | undefined
  const file = options['api-key-file']
  if (file !== undefined) {
    try {
      apiKey = readFileSync(file, 'utf8').trim()
    } catch (err) {
      throw new ConfigError(
        `--api-key-file: cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? 'error'})`,
      )
    }
  } else apiKey = env.WRITEGATE_API_KEY?.trim()
  if (!apiKey) throw new UsageError('an admin API key is needed: --api-key-file <file> or WRITEGATE_API_KEY')
  // One token, or it would not fit in a header, and the error saying so would print it all.
  if (!/^[\x21-\x7e]+$/.test(apiKey))
    throw new UsageError(
      `${file !== undefined ? `--api-key-file: ${file}` : 'WRITEGATE_API_KEY'} does not hold one API key (one line, no spaces)`,
    )
  return { url: url.replace(/\/+$/, ''), apiKey }
}

/** A control-plane answer that is not the one asked for: one line with its code. */
class ApiError extends Error {}

/**
 * What a writegate control plane answers to the reads below. Another server at that URL (a
 * login page, a proxy's `{}`) answers 200 too: it is named as such, not read as an empty list.
 */
const meAnswer = z.looseObject({ tenantId: z.string().min(1) })
const systemsAnswer = z.looseObject({
  systems: z.array(z.looseObject({ systemId: z.string().min(1), version: z.number().int() })),
})

/** The answer's JSON; undefined when it is empty or not JSON. */
async function call(api: ApiTarget, method: string, path: string, body?: unknown): Promise<unknown> {
  let res: Response
  try {
    res = await fetch(`${api.url}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${api.apiKey}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    })
  } catch (err) {
    const cause = (err as { cause?: { code?: string } }).cause?.code ?? (err as Error).message
    throw new ApiError(`cannot reach the control plane at ${api.url} (${cause}); set --url or WRITEGATE_URL`)
  }
  const text = await res.text()
  let json: unknown
  try {
    json = text ? JSON.parse(text) : undefined
  } catch {}
  if (!res.ok) {
    const e = (json !== null && typeof json === 'object' ? json : {}) as Record<string, unknown>
    throw new ApiError(
      `${method} ${path}: ${res.status} ${typeof e.code === 'string' ? e.code : ''} ${typeof e.error === 'string' ? e.error : text.slice(0, 200)}`.replace(
        /\s+/g,
        ' ',
      ),
    )
  }
  return json
}

async function read<T>(api: ApiTarget, path: string, shape: z.ZodType<T>): Promise<T> {
  const json = await call(api, 'GET', path)
  const r = shape.safeParse(json)
  if (!r.success)
    throw new ApiError(
      `${api.url} is not a writegate control plane: GET ${path} answered ${json === undefined ? 'something other than JSON' : 'JSON of another shape'}; set --url or WRITEGATE_URL`,
    )
  return r.data
}

/**
 * What the control plane holds, read by its shape only: a system enrolled before a check this
 * CLI knows (a route an earlier one covers, say) is still exported, and replaced by a file that
 * mends it, instead of stopping both.
 */
const enrolledSchema = z.object({ systemId: systemIdSchema, ...systemDefinitionShape }).strict()

/** A definition as the schema fills it in (defaults included), so equal meanings compare equal. */
function normal(d: unknown, schema: z.ZodType<SystemDefinition, unknown> = systemSchema): SystemDefinition {
  const r = schema.safeParse(d)
  if (r.success) return r.data
  // An enrolled system this CLI cannot read (a newer control plane's, say): named, with where.
  const issue = r.error.issues[0]
  const id = (d as { systemId?: unknown }).systemId
  throw new ApiError(
    `system ${String(id)}: ${issue?.path.map(String).join('.') || '(root)'}: ${issue?.message ?? 'not a system definition'}`,
  )
}

function definitionOf(s: SystemDefinition | Enrolled, enrolled = false): SystemDefinition {
  const { systemId, kind, upstream, credential, baseUrlEnv, reads, routes, tools } = s
  const g = s as Partial<SystemDefinition>
  return normal(
    {
      systemId,
      kind,
      upstream,
      ...(credential ? { credential } : {}),
      ...(g.caBundle ? { caBundle: g.caBundle } : {}),
      ...(baseUrlEnv ? { baseUrlEnv } : {}),
      reads,
      routes,
      tools,
      ...(g.mcp ? { mcp: g.mcp } : {}),
      ...(g.graphql ? { graphql: g.graphql } : {}),
    },
    enrolled ? enrolledSchema : systemSchema,
  )
}

function changedFields(a: SystemDefinition, b: SystemDefinition): string[] {
  const keys = new Set([...Object.keys(a), ...Object.keys(b)])
  return [...keys]
    .filter(
      (k) =>
        canonicalJson((a as unknown as Record<string, unknown>)[k] ?? null) !==
        canonicalJson((b as unknown as Record<string, unknown>)[k] ?? null),
    )
    .sort()
}

/**
 * `writegate systems apply -f <file>`: makes the tenant's enrolled systems what the file says,
 * declaratively and idempotently. A system the file has and the tenant does not is created;
 * one whose definition differs is replaced, conditionally on the version it was read at (a
 * concurrent change makes it fail, never lose an update); with `--prune`, one the file lacks is
 * deleted. It prints the diff; with `--dry-run` it changes nothing.
 */
export async function systemsApplyCommand(
  options: Record<string, string | undefined>,
  io: CommandIo,
  env: NodeJS.ProcessEnv = process.env,
): Promise<number> {
  const file = options.file
  if (file === undefined) throw new UsageError('missing -f <file>')
  const dryRun = options['dry-run'] === 'true'
  const prune = options.prune === 'true'
  const api = apiTarget(options, env)
  const wanted = loadSystemsFile(file, '-f')
  try {
    const me = await read(api, '/v1/me', meAnswer)
    for (const s of wanted.systems)
      if (s.tenantId !== undefined && s.tenantId !== me.tenantId)
        throw new ConfigError(
          `${file}: system ${s.systemId}: tenantId ${s.tenantId} is not the key's tenant (${me.tenantId})`,
        )
    const current = (await read(api, '/v1/systems', systemsAnswer)) as unknown as { systems: Enrolled[] }
    const byId = new Map(current.systems.map((s) => [s.systemId, s]))
    const lines: string[] = []
    const steps: (() => Promise<unknown>)[] = []
    for (const s of wanted.systems) {
      const { tenantId: _, ...rest } = s
      const want = definitionOf(rest as SystemDefinition)
      const have = byId.get(s.systemId)
      if (!have) {
        lines.push(`+ ${s.systemId} (create)`)
        steps.push(() => call(api, 'POST', '/v1/systems', want))
        continue
      }
      const changed = changedFields(definitionOf(have, true), want)
      if (changed.length === 0) {
        lines.push(`= ${s.systemId} (unchanged, version ${have.version})`)
        continue
      }
      lines.push(
        `~ ${s.systemId} (update ${changed.join(', ')}: version ${have.version} → ${have.version + 1})`,
      )
      const { systemId, ...definition } = want
      steps.push(() =>
        call(api, 'PUT', `/v1/systems/${encodeURIComponent(systemId)}`, {
          ...definition,
          ifVersion: have.version,
        }),
      )
    }
    const named = new Set(wanted.systems.map((s) => s.systemId))
    for (const have of current.systems) {
      if (named.has(have.systemId)) continue
      if (!prune) {
        lines.push(`? ${have.systemId} (enrolled, not in the file; --prune deletes it)`)
        continue
      }
      lines.push(`- ${have.systemId} (delete, version ${have.version})`)
      steps.push(() =>
        call(api, 'DELETE', `/v1/systems/${encodeURIComponent(have.systemId)}?ifVersion=${have.version}`),
      )
    }
    io.stdout(`${lines.join('\n')}\n`)
    if (dryRun) {
      io.stdout(`dry run: ${steps.length} change(s) not made\n`)
      return 0
    }
    for (const step of steps) await step()
    io.stdout(`applied ${steps.length} change(s)\n`)
    return 0
  } catch (err) {
    if (err instanceof ApiError) {
      io.stderr(`writegate: ${err.message}\n`)
      return 1
    }
    throw err
  }
}

/** `writegate systems export`: the tenant's enrolled systems in the format `apply -f` reads. */
export async function systemsExportCommand(
  options: Record<string, string | undefined>,
  io: CommandIo,
  env: NodeJS.ProcessEnv = process.env,
): Promise<number> {
  const api = apiTarget(options, env)
  try {
    const { systems } = (await read(api, '/v1/systems', systemsAnswer)) as unknown as { systems: Enrolled[] }
    io.stdout(stringify({ systems: systems.map((s) => definitionOf(s, true)) }))
    return 0
  } catch (err) {
    if (err instanceof ApiError) {
      io.stderr(`writegate: ${err.message}\n`)
      return 1
    }
    throw err
  }
}
