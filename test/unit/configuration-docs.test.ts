import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import type { z } from 'zod'
import { ENV_OVERRIDES } from '../../src/config/load.js'
import { settingsSchema } from '../../src/config/schema.js'

/** Every leaf setting of the schema, as a dotted path. */
function leaves(schema: z.ZodType, prefix: string[] = []): string[] {
  const def = (schema as unknown as { _zod: { def: Record<string, unknown> & { type: string } } })._zod.def
  if (def.type === 'object')
    return Object.entries(def.shape as Record<string, z.ZodType>).flatMap(([k, v]) =>
      leaves(v, [...prefix, k]),
    )
  if (['default', 'prefault', 'optional', 'nullable', 'readonly'].includes(def.type))
    return leaves(def.innerType as z.ZodType, prefix)
  if (def.type === 'pipe') return leaves(def.in as z.ZodType, prefix)
  return [prefix.join('.')]
}

t.test('docs/configuration.md documents every setting and every environment variable', async (t) => {
  const doc = readFileSync(join(import.meta.dirname, '..', '..', 'docs', 'configuration.md'), 'utf8')
  const settings = leaves(settingsSchema)
  t.ok(settings.length > 40)
  for (const s of settings) t.ok(doc.includes(`| \`${s}\` |`), `setting ${s}`)
  for (const [name, o] of Object.entries(ENV_OVERRIDES))
    t.match(
      doc,
      new RegExp(`\\| \`${o.path.join('\\.')}\` \\| \`${name}\` \\|`),
      `${name} → ${o.path.join('.')}`,
    )
})
