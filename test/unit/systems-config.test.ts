import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { ConfigError } from '../../src/config/load.js'
import { loadSystemsFile } from '../../src/config/systems.js'

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
    [
      'systems: [{systemId: billing, upstream: "https://x.io"}]',
      /: system billing: systemId: expected sys_<name>/,
    ],
    [
      'systems: [{systemId: sys_a, upstream: "https://x.io/api"}]',
      /: system sys_a: upstream: expected an origin/,
    ],
    [
      'systems: [{systemId: sys_a, upstream: "http://127.0.0.1:18440\\\\admin\\\\x"}]',
      /: system sys_a: upstream: expected an origin: scheme, host and port only/,
    ],
    [
      'systems: [{systemId: sys_a, upstream: "http://exa\\tmple.com"}]',
      /: system sys_a: upstream: expected an origin: scheme, host and port only/,
    ],
    [
      'systems: [{systemId: sys_a, upstream: "ftp://x.io"}]',
      /: system sys_a: upstream: expected an https:\/\/ or http:\/\/ origin/,
    ],
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
      /: system sys_a: routes\.0\.method/,
    ],
    [
      'systems: [{systemId: sys_a, upstream: "https://x.io", tools: [{name: a, verb: v, method: POST, pathTemplate: /a, revert: {tool: b}}]}]',
      /: system sys_a: tools\.0\.revert\.tool: no tool b in this system/,
    ],
    [
      'systems: [{systemId: sys_a, upstream: "https://x.io", routes: [{method: POST, path: "/a;b", verb: v}]}]',
      /: system sys_a: routes\.0\.path: a route path may not contain ;/,
    ],
    [
      'systems: [{systemId: sys_a, upstream: "https://x.io", routes: [{method: POST, path: "/a*/b", verb: v}]}]',
      /: system sys_a: routes\.0\.path: a route path may use \* only as its last character/,
    ],
    [
      // Compiled, `{a}-{b}-{c}` backtracks cubically in the segment's length.
      'systems: [{systemId: sys_a, upstream: "https://x.io", routes: [{method: POST, path: "/v1/{a}-{b}", verb: v}]}]',
      /: system sys_a: routes\.0\.path: a path pattern may hold at most one \{placeholder\} per segment/,
    ],
    ['systems: [{systemId: sys_a, upstream: "https://x.io", extra: 1}]', /: system sys_a: /],
    // Issue 14: each stops start-up naming the file, the system and the field.
    [
      'systems: [{systemId: sys_a, upstream: "https://x.io", routes: [{method: POST, path: "/v1/customers/{customer}", verb: v, target: "{custmer}"}]}]',
      /: system sys_a: routes\.0\.target: placeholder \{custmer\} is not defined by the path \/v1\/customers\/\{customer\}/,
    ],
    [
      'systems: [{systemId: sys_a, upstream: "billing.internal"}]',
      /: system sys_a: upstream: expected an origin such as https:\/\/api\.example\.com/,
    ],
    [
      'systems: [{systemId: sys_a, upstream: "billing.internal:8443"}]',
      /: system sys_a: upstream: expected an https:\/\/ or http:\/\/ origin/,
    ],
    ['systems: []', /: systems: the file enrols no system/],
    ['{}', /: systems: the file enrols no system/],
    [
      'systems: [{systemId: sys_a, upstream: "https://x.io", routes: [{method: POST, path: "/v1/a/{x}", verb: v}, {method: POST, path: "/V1/A/{y}/", verb: w}]}]',
      /: system sys_a: routes\.1: duplicate route: POST \/V1\/A\/\{y\}\/ matches what routes\.0 matches/,
    ],
    [
      // Routes match decoded (found in review: both were taken, and the second never decided).
      'systems: [{systemId: sys_a, upstream: "https://x.io", routes: [{method: POST, path: "/v1/users/%40me", verb: v}, {method: POST, path: "/v1/users/@ME", verb: w}]}]',
      /: system sys_a: routes\.1: duplicate route: POST \/v1\/users\/@ME matches what routes\.0 matches/,
    ],
    [
      'systems: [{systemId: sys_a, upstream: "https://x.io", routes: [{method: POST, path: "/v1/{doc}", verb: v}, {method: POST, path: "/v1/%7Bdoc%7D", verb: w}]}]',
      /: system sys_a: routes\.1: never decides: every POST \/v1\/%7Bdoc%7D is matched first by routes\.0/,
    ],
    [
      // Found in review: listed after the broader route, the deny route could never decide.
      'systems: [{systemId: sys_a, upstream: "https://x.io", routes: [{method: POST, path: "/v2/refunds/*", verb: v}, {method: POST, path: "/v2/refunds/{id}", verb: w}]}]',
      /: system sys_a: routes\.1: never decides: every POST \/v2\/refunds\/\{id\} is matched first by routes\.0 \(\/v2\/refunds\/\*\); list the narrower route first/,
    ],
    [
      'systems: [{systemId: sys_a, upstream: "https://x.io", tools: [{name: a, verb: v, method: POST, pathTemplate: /a}, {name: a, verb: v, method: POST, pathTemplate: /b}]}]',
      /: system sys_a: tools\.1\.name: duplicate tool a/,
    ],
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
