import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { ERRORS, JSON_RPC_CODES, JSON_RPC_OTHER } from '../../src/core/errors.js'

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

t.test(
  'docs/errors.md lists every MCP JSON-RPC code, and each names a registry code or a decision',
  async (t) => {
    const doc = readFileSync(join(import.meta.dirname, '..', '..', 'docs', 'errors.md'), 'utf8')
    const registry = new Set(Object.values(ERRORS).map((d) => d.code))
    const numbers = new Set<number>()
    for (const [code, n] of Object.entries(JSON_RPC_CODES)) {
      t.notOk(numbers.has(n), `${n} is used once`)
      numbers.add(n)
      t.ok(
        registry.has(code) || code === 'denied' || code === 'step_up_required',
        `${code} is a known answer`,
      )
      t.ok(n === -32600 || (n <= -32000 && n >= -32099), `${n} is in the server-error range`)
      t.match(doc, new RegExp(`\\| ${n} \\| \`${code}\` \\|`), `${code} (${n}) is documented`)
    }
    t.match(doc, new RegExp(`\\| ${JSON_RPC_OTHER} \\| any other \\|`))
  },
)
