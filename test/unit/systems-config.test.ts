import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { ConfigError } from '../../src/config/load.js'
import { loadSystemsFile, readCredential } from '../../src/config/systems.js'

const dir = mkdtempSync(join(tmpdir(), 'wg-systems-'))
const write = (text: string) => {
  const p = join(dir, `${Math.random().toString(36).slice(2)}.yaml`)
  writeFileSync(p, text)
  return p
}

t.test('the example file is valid', async (t) => {
  const f = loadSystemsFile(join(import.meta.dirname, '..', '..', 'config', 'systems.example.yaml'))
  t.equal(f.systems[0]?.systemId, 'sys_billing')
  t.equal(f.systems[0]?.reads, 'pass')
  t.equal(f.systems[0]?.tools[0]?.revert?.tool, 'cancel_refund')
})

t.test('bad systems files stop start-up with one line', async (t) => {
  const cases: [string, RegExp][] = [
    ['systems: [{systemId: billing, upstream: "https://x.io"}]', /systems\.0\.systemId: expected sys_<name>/],
    [
      'systems: [{systemId: sys_a, upstream: "https://x.io/api"}]',
      /systems\.0\.upstream: expected an origin/,
    ],
    ['systems: [{systemId: sys_a, upstream: "ftp://x.io"}]', /systems\.0\.upstream/],
    [
      'systems: [{systemId: sys_a, upstream: "https://x.io"}, {systemId: sys_a, upstream: "https://y.io"}]',
      /duplicate systemId sys_a/,
    ],
    [
      'systems: [{systemId: sys_a, upstream: "https://x.io", credential: {header: x}}]',
      /set exactly one of fromEnv or fromFile/,
    ],
    [
      'systems: [{systemId: sys_a, upstream: "https://x.io", routes: [{method: FETCH, path: /a, verb: v}]}]',
      /systems\.0\.routes\.0\.method/,
    ],
    [
      'systems: [{systemId: sys_a, upstream: "https://x.io", tools: [{name: a, verb: v, method: POST, pathTemplate: /a, revert: {tool: b}}]}]',
      /no tool b in sys_a/,
    ],
    [
      'systems: [{systemId: sys_a, upstream: "https://x.io", routes: [{method: POST, path: "/a;b", verb: v}]}]',
      /systems\.0\.routes\.0\.path: a route path may not contain ;/,
    ],
    [
      'systems: [{systemId: sys_a, upstream: "https://x.io", routes: [{method: POST, path: "/a*/b", verb: v}]}]',
      /systems\.0\.routes\.0\.path: a route path may use \* only as its last character/,
    ],
    ['systems: [{systemId: sys_a, upstream: "https://x.io", extra: 1}]', /systems\.0: /],
    ['systems: [', /invalid systems file/],
  ]
  for (const [text, pattern] of cases) {
    try {
      loadSystemsFile(write(text))
      t.fail(`accepted: ${text}`)
    } catch (err) {
      t.type(err, ConfigError)
      t.match((err as Error).message, pattern)
      t.notOk((err as Error).message.includes('\n'))
    }
  }
  t.throws(() => loadSystemsFile(join(dir, 'missing.yaml')), /does not exist/)
})

t.test('credentials come from the environment or a file, with their prefix', async (t) => {
  t.equal(
    readCredential({ header: 'authorization', prefix: 'Bearer ', fromEnv: 'TOK' }, { TOK: 's3cret' }),
    'Bearer s3cret',
  )
  const file = write('filesecret\n')
  t.equal(readCredential({ header: 'x-api-key', prefix: '', fromFile: file }), 'filesecret')
  t.throws(() => readCredential({ header: 'a', prefix: '', fromEnv: 'NOPE' }, {}), /NOPE is not set/)
})
