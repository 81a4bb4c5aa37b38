import { Ajv, type Options } from 'ajv'
import { RE2JS } from 're2js'

/**
 * ECMAScript spells a code point `\uXXXX` or `\u{X…}`, RE2 `\x{X…}`; every other escape is
 * copied as it is (so `\\u` stays a backslash and a `u`).
 */
export function re2Syntax(pattern: string): string {
  let out = ''
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i] as string
    if (c !== '\\') {
      out += c
      continue
    }
    const rest = pattern.slice(i + 1)
    const m = /^u([0-9A-Fa-f]{4})/.exec(rest) ?? /^u\{([0-9A-Fa-f]{1,6})\}/.exec(rest)
    if (m) {
      out += `\\x{${m[1]}}`
      i += m[0].length
    } else {
      out += c + (pattern[i + 1] ?? '')
      i++
    }
  }
  return out
}

/**
 * A schema's `pattern` and `patternProperties` run on RE2 (re2js, pure JavaScript): linear in
 * the input, whatever the pattern. On V8's backtracking engine a tenant's `(a+)+$` and an
 * agent's 30-character string held the control plane's event loop, every tenant's, for seconds.
 * RE2 has no backreferences or lookaround: such a pattern does not compile, so enrolment
 * refuses it (400, naming the tool).
 */
const linearRegExp: NonNullable<NonNullable<Options['code']>['regExp']> = Object.assign(
  (pattern: string) => {
    const re = RE2JS.compile(re2Syntax(pattern))
    // ajv keys the compiled patterns it shares by toString(): one per pattern, as a RegExp's is.
    return { test: (s: string) => re.test(s), toString: () => `/${pattern}/re2` }
  },
  { code: 're2js' },
)

/** The ajv that compiles tools' params schemas, at enrolment and when checking a call. */
export function createParamsAjv(): Ajv {
  return new Ajv({ allErrors: true, strict: false, code: { regExp: linearRegExp } })
}
