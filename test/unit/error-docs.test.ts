import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { ERRORS } from '../../src/core/errors.js'

t.test('docs/errors.md documents every code in the registry, with its status', async (t) => {
  const doc = readFileSync(join(import.meta.dirname, '..', '..', 'docs', 'errors.md'), 'utf8')
  const codes = new Set<string>()
  for (const def of Object.values(ERRORS)) {
    t.notOk(codes.has(def.code), `${def.code} is unique`)
    codes.add(def.code)
    t.match(
      doc,
      new RegExp(`\\| \`${def.code}\` \\| ${def.status} \\|`),
      `${def.code} (${def.status}) is documented`,
    )
  }
  const documented = [...doc.matchAll(/^\| `([a-z_]+)` \| \d{3} \|/gm)].map((m) => m[1])
  for (const code of documented) t.ok(codes.has(code as string), `documented ${code} exists in the registry`)
})
