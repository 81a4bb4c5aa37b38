import t from 'tap'
import { createParamsAjv, re2Syntax } from '../../src/systems/params-schema.js'
import { paramsSchemaProblem } from '../../src/systems/systems-registry.js'

const stringWith = (pattern: string) => ({ type: 'string', pattern })

t.test('patterns run in linear time: a catastrophic one answers at once', async (t) => {
  const v = createParamsAjv().compile(stringWith('(a+)+$'))
  // Backtracking, 30 characters take seconds and 100,000 never end (the test would time out).
  t.equal(v(`${'a'.repeat(100_000)}!`), false)
  t.equal(v('aaa'), true)
  t.equal(createParamsAjv().compile(stringWith('(a|aa)+$'))(`${'a'.repeat(100_000)}!`), false)
})

t.test('what RE2 cannot run is refused at enrolment, naming why', async (t) => {
  t.match(paramsSchemaProblem(stringWith('(?=a)a')), /unsupported Perl syntax/)
  t.match(paramsSchemaProblem(stringWith('(a)\\1')), /invalid escape sequence/)
  t.match(
    paramsSchemaProblem({ type: 'object', patternProperties: { '(?<!x)y': { type: 'number' } } }),
    /error parsing regexp/,
  )
  t.equal(paramsSchemaProblem(stringWith('^[a-z]{2,5}$')), null)
})

t.test('ECMAScript escapes mean what they do in JavaScript', async (t) => {
  t.equal(re2Syntax('caf\\u00e9'), 'caf\\x{00e9}')
  t.equal(re2Syntax('\\u{1F600}'), '\\x{1F600}')
  t.equal(re2Syntax('\\\\u0041'), '\\\\u0041', 'an escaped backslash, then u')
  const v = createParamsAjv().compile(stringWith('^caf\\u00e9\\p{L}?$'))
  t.same([v('café'), v('cafe'), v('caféx')], [true, false, true])
  t.same(
    ['12', 'x'].map((s) => createParamsAjv().compile(stringWith('^\\d+$'))(s)),
    [true, false],
  )
})

t.test('one ajv keeps each pattern apart (it shares compiled patterns by their toString)', async (t) => {
  const ajv = createParamsAjv()
  const digits = ajv.compile({ type: 'object', patternProperties: { '^x\\d+$': { type: 'number' } } })
  const words = ajv.compile({ type: 'object', properties: { b: stringWith('^caf\\u00e9$') } })
  t.equal(digits({ x1: 'not a number' }), false)
  t.equal(words({ b: 'café' }), true, "the second pattern is its own, not the first's")
  t.equal(words({ b: 'x1' }), false)
})
