import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { Ajv } from 'ajv'
import t from 'tap'
import { parse as parseYaml } from 'yaml'
import { CHART_DIR, generate, renderTable, TABLE_END, TABLE_START } from '../../scripts/gen-values-schema.js'

const valuesText = readFileSync(join(CHART_DIR, 'values.yaml'), 'utf8')
const generated = generate(valuesText)

t.test('every value in values.yaml has a comment', async (t) => {
  t.same(generated.undocumented, [], 'document these in values.yaml')
  t.ok(generated.rows.length > 50)
})

t.test('the committed values.schema.json is what values.yaml generates', async (t) => {
  const committed = JSON.parse(readFileSync(join(CHART_DIR, 'values.schema.json'), 'utf8'))
  t.same(committed, generated.schema, 'stale: run npx tsx scripts/gen-values-schema.ts')
})

t.test('the README values table is what values.yaml generates', async (t) => {
  const readme = readFileSync(join(CHART_DIR, 'README.md'), 'utf8')
  const start = readme.indexOf(TABLE_START) + TABLE_START.length
  const end = readme.indexOf(TABLE_END)
  t.equal(
    readme.slice(start, end).trim(),
    renderTable(generated.rows),
    'stale: run npx tsx scripts/gen-values-schema.ts',
  )
})

t.test('the generator reads types, comments and constraints', async (t) => {
  const g = generate(
    '# Header of the file.\n\n# The image.\nimage:\n  # Its tag.\n  tag: ""\n  # Replicas.\n  n: 2\n# Open map.\nsettings: {}\nbare: 1\n',
  )
  t.same(g.undocumented, ['bare'])
  t.same(
    g.rows.map((r) => [r.key, r.type, r.default, r.description]),
    [
      ['image.tag', 'string', '""', 'Its tag.'],
      ['image.n', 'integer', '2', 'Replicas.'],
      ['settings', 'object', '{}', 'Open map.'],
      ['bare', 'integer', '1', ''],
    ],
  )
  const image = (g.schema.properties as Record<string, Record<string, unknown>>).image
  t.equal(image?.description, 'The image.', 'the file header is not part of the first key')
  t.equal(image?.additionalProperties, false, 'typos in values are rejected')
  const real = generated.schema.properties as Record<
    string,
    { properties?: Record<string, Record<string, unknown>> }
  >
  t.equal(real.controlPlane?.properties?.replicas?.minimum, 2)
  t.same(real.redis?.properties?.appendfsync?.enum, ['always', 'everysec', 'no'])
  // Every key of values.yaml appears in the schema.
  const walk = (v: unknown, s: Record<string, unknown>, path: string) => {
    if (v && typeof v === 'object' && !Array.isArray(v) && s.additionalProperties === false) {
      for (const [k, child] of Object.entries(v)) {
        const sub = (s.properties as Record<string, Record<string, unknown>>)[k]
        t.ok(sub, `${path}${k} is in the schema`)
        if (sub) walk(child, sub, `${path}${k}.`)
      }
    }
  }
  walk(parseYaml(valuesText), generated.schema, '')
})

t.test('the chart refuses, as the settings do, values that would install and crash-loop', async (t) => {
  const ajv = new Ajv({ allErrors: true, strict: false })
  const valid = ajv.compile(JSON.parse(readFileSync(join(CHART_DIR, 'values.schema.json'), 'utf8')))
  const defaults = parseYaml(valuesText) as Record<string, Record<string, Record<string, unknown>>>
  t.ok(valid(defaults), JSON.stringify(valid.errors))
  const withValue = (path: string[], value: unknown) => {
    const copy = structuredClone(defaults) as Record<string, unknown>
    let node = copy
    for (const p of path.slice(0, -1)) node = node[p] as Record<string, unknown>
    node[path.at(-1) as string] = value
    return copy
  }
  // A list value, or (the last two) one string: each with a value the settings take and one they refuse.
  const cases: [string[], unknown, unknown][] = [
    [['controlPlane', 'trustProxy'], ['10.0.0.0/8', 'loopback', '::1'], ['my ingress']],
    [['controlPlane', 'trustProxy'], ['fd00::/8'], ['0.0.0.0/0']],
    [['controlPlane', 'trustProxy'], ['192.168.0.1'], ['999.1.1.1']],
    [['injector', 'enforce', 'excludeOutboundCidrs'], ['10.96.0.1/32', 'fd00::/8'], ['10.96.0.1']],
    [['injector', 'enforce', 'excludeOutboundCidrs'], ['10.0.0.0/8'], ['10.0.0.0/99']],
    // Found in review: enforcement off in all but name.
    [['injector', 'enforce', 'excludeOutboundCidrs'], ['fc00::/7'], ['0.0.0.0/0']],
    [['injector', 'enforce', 'excludeOutboundCidrs'], ['2001:db8::/48'], ['2600::/8']],
    [['injector', 'enforce', 'excludeOutboundCidrs'], ['10.96.0.0/12'], ['::/0']],
    [['injector', 'proxy', 'noProxy'], ['.svc.cluster.local', '10.0.0.0/8'], ['a b']],
    [['injector', 'proxy', 'noProxy'], ['*.example.com'], ['*']],
    [['injector', 'proxy', 'routesKey'], 'systems.yaml', '../x y'],
    [['injector', 'defaults', 'proxySecret'], 'writegate-proxy', 'Writegate_Proxy'],
  ]
  for (const [path, good, bad] of cases) {
    t.ok(valid(withValue(path, good)), `${path.join('.')}: accepted`)
    t.notOk(valid(withValue(path, bad)), `${path.join('.')}: refused`)
  }
})
