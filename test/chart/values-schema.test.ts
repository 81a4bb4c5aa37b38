import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { Ajv } from 'ajv'
import t from 'tap'
import { parse as parseYaml } from 'yaml'
import { CHART_DIR, generate, renderTable, TABLE_END, TABLE_START } from '../../scripts/gen-values-schema.js'
import { settingsSchema } from '../../src/config/schema.js'
import { VERSION } from '../../src/version.js'

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
    // Found in review: each of these installed, and the injector refused its settings.
    [['injector', 'proxy', 'noProxy'], ['10.0.0.0/8'], ['0.0.0.0/0']],
    [['injector', 'proxy', 'noProxy'], ['fd00::/7'], ['::/0']],
    [['injector', 'proxy', 'noProxy'], ['1.0.0.0/8'], ['1.0.0.0/4']],
    [['injector', 'defaults', 'routesConfigMap'], 'routes', 'Bad'],
    [['injector', 'defaults', 'routesConfigMap'], '', 'a_b'],
    [['injector', 'defaults', 'tlsCaSecret'], 'writegate-ca', 'Bad_CA'],
    [['injector', 'proxy', 'resources'], { limits: { cpu: '2' } }, { limits: { cpu: 'lots' } }],
    [['injector', 'proxy', 'resources'], { requests: { memory: '1Gi' } }, { requests: { gpu: '1' } }],
    [['injector', 'proxy', 'resources'], { limits: { memory: '512Mi' } }, { limits: { memory: 512 } }],
    [['injector', 'proxy', 'tag'], '0.2.0', 'bad tag'],
    [['injector', 'proxy', 'repository'], 'registry.example:5000/team/writegate', 'Not An Image!'],
    [['image', 'tag'], '0.2.0-rc.1', 'bad tag'],
    [['image', 'repository'], 'ghcr.io/acme/writegate', 'ghcr.io/acme/write gate'],
    [['injector', 'enforce', 'excludeOutboundCidrs'], ['2001:db8::/40'], [':::/40']],
    [['injector', 'enforce', 'excludeOutboundCidrs'], ['::ffff:10.0.0.0/104'], ['1::2::3/64']],
  ]
  for (const [path, good, bad] of cases) {
    t.ok(valid(withValue(path, good)), `${path.join('.')}: accepted`)
    t.notOk(valid(withValue(path, bad)), `${path.join('.')}: refused`)
  }
})

/** The injector's settings a chart value becomes (the writegate.settings template, one value at a time). */
function injectorSettings(path: string, value: unknown): Record<string, unknown> {
  const image = (repository: unknown, tag: unknown) => ({
    proxy: { image: `${repository || 'writegate'}:${tag || VERSION}` },
  })
  switch (path) {
    case 'injector.proxy.noProxy':
      return { proxy: { noProxy: value } }
    case 'injector.enforce.excludeOutboundCidrs':
      return { enforce: { excludeOutboundCidrs: value } }
    case 'injector.defaults.routesConfigMap':
    case 'injector.defaults.tlsCaSecret':
      // Empty means unset.
      return value === '' ? {} : { defaults: { [path.split('.').at(-1) as string]: value } }
    case 'injector.proxy.resources':
      return { proxy: { resources: value } }
    case 'injector.proxy.tag':
    case 'image.tag':
      return image('', value)
    case 'injector.proxy.repository':
    case 'image.repository':
      return image(value, '')
  }
  throw new Error(`no mapping for ${path}`)
}

/** A deterministic stream of pseudo-random numbers in [0, 1). */
function lcg(seed: number) {
  let x = seed
  return () => {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0
    return x / 2 ** 32
  }
}

t.test(
  'the chart and the injector give every value the same verdict (they cannot drift apart)',
  async (t) => {
    const ajv = new Ajv({ allErrors: true, strict: false })
    const valid = ajv.compile(JSON.parse(readFileSync(join(CHART_DIR, 'values.schema.json'), 'utf8')))
    const defaults = parseYaml(valuesText) as Record<string, unknown>
    const chartAccepts = (path: string, value: unknown) => {
      const copy = structuredClone(defaults)
      const keys = path.split('.')
      let node = copy
      for (const k of keys.slice(0, -1)) node = node[k] as Record<string, unknown>
      node[keys.at(-1) as string] = value
      return valid(copy)
    }
    const injectorAccepts = (path: string, value: unknown) =>
      settingsSchema.safeParse({ injector: injectorSettings(path, value) }).success

    const addresses = [
      ...['0.0.0.0', '1.0.0.0', '10.96.0.1', '255.255.255.255', '256.1.1.1', '01.2.3.4', '1.2.3', 'a.b.c.d'],
      ...['::', '::1', ':::', '1::', '1::2::3', '1:2:3:4:5:6:7:8', '1:2:3:4:5:6:7:8:9', '1:2:3:4:5:6:7::'],
      ...[
        '::2:3:4:5:6:7:8',
        '::ffff:1.2.3.4',
        '::ffff:0.0.0.0',
        '1:2:3:4:5:6:1.2.3.4',
        '1:2:3:4:5:6:7:1.2.3.4',
      ],
      ...[
        '2001:db8::',
        '2600::',
        'fd00::',
        'FC00::',
        'fdff:1::',
        'fc::',
        'fe80::',
        'fd00::1.2.3.4',
        '12345::',
      ],
      ...['fd00::1%eth0', 'g::', '1:::2', '::1:'],
    ]
    const prefixes = [
      '',
      '/0',
      '/00',
      '/4',
      '/6',
      '/7',
      '/007',
      '/8',
      '/08',
      '/31',
      '/32',
      '/33',
      '/64',
      '/128',
    ]
    const cidrs = addresses.flatMap((a) => [...prefixes, '/129', '/999', '/x', '/8/9'].map((p) => `${a}${p}`))
    // Random strings over the characters of addresses, to find what no one thought to list.
    const random = lcg(7)
    const pick = (chars: string, n: number) =>
      Array.from({ length: n }, () => chars[Math.floor(random() * chars.length)]).join('')
    for (let i = 0; i < 3000; i++)
      cidrs.push(
        `${pick(i % 2 ? '0123456789.' : '0fcd1:::.', 2 + Math.floor(random() * 14))}/${Math.floor(random() * 140)}`,
      )
    const corpus: [string, unknown[]][] = [
      ['injector.enforce.excludeOutboundCidrs', cidrs.map((c) => [c])],
      [
        'injector.proxy.noProxy',
        [...cidrs, '*', '*.example.com', '.svc', 'a b', 'foo/3', ''].map((c) => [c]),
      ],
      [
        'injector.defaults.routesConfigMap',
        ['', 'a', 'a.b-c', 'A', 'a_b', '-a', 'a-', 'a..b', 'a'.repeat(253), 'a'.repeat(254)],
      ],
      ['injector.defaults.tlsCaSecret', ['', 'ca', 'Bad_CA', 'ca.', '1-2']],
      [
        'injector.proxy.resources',
        [
          {},
          { requests: {}, limits: {} },
          { limits: { cpu: '1', memory: '256Mi' } },
          { requests: { cpu: '0.5', memory: '1G' } },
          { limits: { cpu: 'lots' } },
          { limits: { cpu: '1.' } },
          { limits: { memory: '1Pi' } },
          { limits: { cpu: 1 } },
          { limits: { gpu: '1' } },
          { other: {} },
        ],
      ],
      ...(['injector.proxy.tag', 'image.tag'] as const).map((p): [string, unknown[]] => [
        p,
        [
          '',
          '1',
          'v1.2.3_rc-1',
          'bad tag',
          '-x',
          '.x',
          'a:b',
          `1@sha256:${'a'.repeat(64)}`,
          `1@sha256:${'a'.repeat(63)}`,
          'x'.repeat(128),
          'x'.repeat(129),
        ],
      ]),
      ...(['injector.proxy.repository', 'image.repository'] as const).map((p): [string, unknown[]] => [
        p,
        ['w', 'registry.example:5000/team/writegate', 'Reg/W', 'a b', 'a//b', 'a/', '/a', 'a@b'],
      ]),
    ]
    // Tags the settings' image pattern takes only as part of the name (`writegate:a:b`): the chart
    // is stricter, as a registry is. Listed, so that the list cannot go stale.
    const stricter = new Set(['a:b', 'x'.repeat(129)])
    for (const [path, values] of corpus) {
      const tag = path.endsWith('.tag')
      const disagree = values.filter(
        (v) => !(tag && stricter.has(v as string)) && chartAccepts(path, v) !== injectorAccepts(path, v),
      )
      t.same(
        disagree.map((v) => ({ value: v, chart: chartAccepts(path, v), injector: injectorAccepts(path, v) })),
        [],
        `${path}: ${values.length} values, the same verdicts`,
      )
      if (tag)
        for (const v of stricter) t.ok(!chartAccepts(path, v) && injectorAccepts(path, v), `${path}: ${v}`)
    }
  },
)
