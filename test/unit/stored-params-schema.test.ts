import t from 'tap'
import type { SystemsFile } from '../../src/config/systems.js'
import { registryOver } from '../helpers/snapshots.js'

// Enrolled before the shape rules: a tool whose schema is only costly keeps working; one whose
// schema is unsafe to run ($async: a promise read as "valid") validates nothing.
const tool = (name: string, params: Record<string, unknown>) => ({
  name,
  verb: 'verify',
  method: 'POST' as const,
  pathTemplate: '/v1/x',
  params,
})
const file = {
  passthrough: [],
  systems: [
    {
      systemId: 'sys_old',
      kind: 'http',
      upstream: 'https://api.example.test',
      reads: 'pass',
      routes: [],
      tools: [
        tool('tag', { type: 'object', properties: { a: { type: 'array', uniqueItems: true } } }),
        tool('later', { $async: true, type: 'object', properties: { id: { type: 'string', maxLength: 3 } } }),
      ],
    },
  ],
} as unknown as SystemsFile

t.test("a stored schema is judged by what it would do, not by today's enrolment rules", async (t) => {
  const registry = await registryOver(file, 'ten_a')
  const tag = await registry.tool('ten_a', 'tag')
  t.same(tag?.validate({ a: [1, 2] }), { ok: true }, 'uniqueItems: still checked')
  t.match(tag?.validate({ a: [1, 1] }), { ok: false })
  const later = await registry.tool('ten_a', 'later')
  t.match(later?.validate({ id: 'too-long' }), {
    ok: false,
    issues: [{ message: /\$async is not supported/ }],
  })
  t.match(later?.validate({ id: 'ok' }), { ok: false }, 'nothing passes a schema that cannot be run safely')
})
