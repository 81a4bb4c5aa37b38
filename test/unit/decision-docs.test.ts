import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { EXECUTE_REASONS, REASONS } from '../../src/core/reasons.js'

t.test('docs/decisions.md documents every decision reason, and only those', async (t) => {
  const doc = readFileSync(join(import.meta.dirname, '..', '..', 'docs', 'decisions.md'), 'utf8')
  const documented = new Set(
    [...doc.matchAll(/^\| `([a-z_]+)` \| (?:ALLOW|DENY|STEP_UP) \|/gm)].map((m) => m[1]),
  )
  t.same([...documented].sort(), Object.keys(REASONS).sort())
})

t.test('docs/decisions.md documents every execute reason, and only those', async (t) => {
  const doc = readFileSync(join(import.meta.dirname, '..', '..', 'docs', 'decisions.md'), 'utf8')
  const documented = new Set([...doc.matchAll(/^\| `([a-z_]+)` \| DENY \(execute\) \|/gm)].map((m) => m[1]))
  t.same([...documented].sort(), Object.keys(EXECUTE_REASONS).sort())
})
