import { existsSync, readFileSync } from 'node:fs'
import { parse as parseYaml } from 'yaml'
import { z } from 'zod'
import { definitionProblems, systemDefinitionShape, systemIdSchema } from '../systems/system-definition.js'
import { ConfigError } from './load.js'

/**
 * A systems file: the format `writegate systems apply` reads and `writegate systems export`
 * writes, and (deprecated for one release) the control plane's `systemsFile` and a proxy's
 * `routesFile`, which are imported as if applied. Upstream origins are fixed here and never
 * taken from a request.
 */

export const fileSystemSchema = z
  .object({
    systemId: systemIdSchema,
    /**
     * The tenant the system is enrolled for. Required in the control plane's `systemsFile`;
     * `writegate systems apply` fills in (and checks) the tenant of its key.
     */
    tenantId: z
      .string()
      .regex(/^ten_[A-Za-z0-9]+$/)
      .optional(),
    ...systemDefinitionShape,
  })
  .strict()
  .superRefine((s, ctx) => {
    for (const p of definitionProblems(s)) ctx.addIssue({ code: 'custom', path: p.path, message: p.message })
  })

export const systemsFileSchema = z
  .object({
    systems: z.array(fileSystemSchema).default([]),
    /** Hosts a CONNECT tunnel may reach. Tunnels are opaque: traffic through them is NOT gated. */
    passthrough: z.array(z.string().regex(/^[A-Za-z0-9.-]+(:\d+)?$/)).default([]),
  })
  .strict()
  .superRefine((f, ctx) => {
    const seen = new Set<string>()
    f.systems.forEach((s, i) => {
      const key = `${s.tenantId ?? ''}/${s.systemId}`
      if (seen.has(key))
        ctx.addIssue({
          code: 'custom',
          path: ['systems', i, 'systemId'],
          message: `duplicate systemId ${s.systemId}`,
        })
      seen.add(key)
    })
  })

export type SystemsFile = z.infer<typeof systemsFileSchema>
export type FileSystem = z.infer<typeof fileSystemSchema>

/** `systems.2.routes.0.target` read as `system sys_x: routes.0.target`, the way an operator finds it. */
function where(raw: unknown, path: PropertyKey[]): string {
  if (path[0] === 'systems' && typeof path[1] === 'number') {
    const entry = (raw as { systems?: unknown[] })?.systems?.[path[1]] as { systemId?: unknown } | undefined
    const name = typeof entry?.systemId === 'string' ? entry.systemId : `#${path[1] + 1}`
    const rest = path.slice(2).map(String).join('.')
    return `system ${name}${rest ? `: ${rest}` : ''}`
  }
  return path.map(String).join('.') || '(root)'
}

/**
 * Reads and validates a systems file; a problem stops start-up with one line naming the file,
 * the system and the field. A file that enrols nothing is refused: it is a mistake (a wrong
 * path, an empty ConfigMap), and would leave every write unmapped.
 */
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
    throw new ConfigError(
      `invalid systems file ${path}: ${where(raw, issue?.path ?? [])}: ${issue?.message ?? 'invalid'}`,
    )
  }
  if (r.data.systems.length === 0)
    throw new ConfigError(`invalid systems file ${path}: systems: the file enrols no system`)
  return r.data
}
