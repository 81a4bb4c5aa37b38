import t from 'tap'
import { compilePathPattern } from '../../src/core/path-pattern.js'
import { routeCovers } from '../../src/systems/route-coverage.js'

// [earlier, later, whether the earlier matches every path the later does]
const cases: [string, string, boolean][] = [
  ['/v2/refunds/*', '/v2/refunds/{id}', true],
  ['/v2/items/{id}', '/v2/items/danger', true],
  ['/v2/items/{id}', '/V2/Items/{other}/', true],
  ['/v1/*', '/v1/a/b/c', true],
  ['/*', '/anything', true],
  ['/v1/{id}.json', '/v1/a.json', true],
  ['/v1/{id}', '/v1/x{id}.json', true],
  ['/v1/{id}.json', '/v1/{id}', false],
  ['/v1/x{id}', '/v1/{id}', false],
  ['/v1/{id}.json', '/v1/.json', false],
  ['/v2/items/danger', '/v2/items/{id}', false],
  ['/v2/items/{id}', '/v2/items/{id}/sub', false],
  ['/v2/items/{id}', '/v2/items/{id}*', false],
  ['/v2/items/*', '/v2/items', true],
  ['/v2/items/a/*', '/v2/items/*', false],
  ['/v2/a', '/v2/b', false],
]

t.test('a route covers another only when it surely matches every path the other does', async (t) => {
  for (const [earlier, later, covers] of cases)
    t.equal(routeCovers(earlier, later), covers, `${earlier} ⊇ ${later}`)
})

t.test('where coverage is claimed, the matcher agrees on sample paths', async (t) => {
  // The later route's own spellings, and the lenient ones the matcher adds.
  const samples = (pattern: string) => {
    const base = pattern.replace(/\{[A-Za-z_]+\}/g, 'zz9').replace(/\*$/, '')
    const trimmed = base.endsWith('/') ? base.slice(0, -1) : base
    return [
      trimmed,
      `${trimmed}/`,
      `${trimmed}.json`,
      `${trimmed}..`,
      `${trimmed}/deeper/still`,
      trimmed.toUpperCase(),
    ]
  }
  for (const [earlier, later, covers] of cases) {
    if (!covers) continue
    const a = compilePathPattern(earlier)
    const b = compilePathPattern(later)
    for (const path of samples(later))
      if (b.match(path) !== null)
        t.not(a.match(path), null, `${earlier} matches ${path}, which ${later} matches`)
  }
})
