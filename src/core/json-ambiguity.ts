import { goFold } from './case-fold.js'

/**
 * Why two JSON parsers could read one text as different values, if they could: the parts of
 * JSON that RFC 8259 leaves to the parser and I-JSON (RFC 7493) forbids.
 *
 * - A member name used twice in one object. `JSON.parse` keeps the last; RapidJSON's
 *   `FindMember` and simdjson's `find_field` return the first. `{"amount":1,"amount":1000000}`
 *   is a refund of 1 to the gate and of 1,000,000 to such a server.
 * - A number whose digits are not the value JavaScript reads. `JSON.parse` rounds
 *   `12345678901234567891` to …7000, so a target templated from it names another object than
 *   the one a server with big integers or decimals acts on; `1e400` becomes `Infinity`.
 * - An unpaired surrogate (`"\ud800"`), which parsers keep, replace with U+FFFD or refuse.
 * - With `goCase`, two member names of one object that differ only by letter case: Go's
 *   decoder matches a struct field regardless of case and keeps the last (mcp-go binds tool
 *   arguments so), so `{"accountId":"1","accountid":"2"}` is account 1 to the gate and 2 to
 *   such a server. Not for GraphQL variables, which Go servers read into maps by exact name.
 *
 * The gate refuses such a body where it reads values out of it to decide (MCP arguments,
 * GraphQL variables), and an approver is shown its exact text rather than a parsed tree.
 * `text` must already be valid JSON (`JSON.parse` accepted it): this only looks for the above.
 */
export function jsonAmbiguity(text: string, opts: { goCase: boolean }): string | null {
  // The names seen so far in each open object, folded as Go matches them; null for an open array.
  const open: (Map<string, string> | null)[] = []
  const n = text.length
  let i = 0
  while (i < n) {
    const c = text.charCodeAt(i)
    if (c === QUOTE) {
      const end = closingQuote(text, i)
      let s = text.slice(i + 1, end)
      if (s.includes('\\')) s = JSON.parse(text.slice(i, end + 1)) as string
      if (UNPAIRED_SURROGATE.test(s)) return `${JSON.stringify(s)} holds an unpaired surrogate`
      i = end + 1
      while (i < n && isSpace(text.charCodeAt(i))) i++
      if (text.charCodeAt(i) === COLON) {
        const names = open[open.length - 1]
        if (names) {
          const folded = opts.goCase ? goFold(s) : s
          const seen = names.get(folded)
          if (seen === s) return `member ${JSON.stringify(s)} appears twice in one object`
          if (seen !== undefined)
            return `members ${JSON.stringify(seen)} and ${JSON.stringify(s)} differ only by letter case (Go's decoder takes either for one field)`
          names.set(folded, s)
        }
      }
      continue
    }
    if (c === 0x7b) open.push(new Map())
    else if (c === 0x5b) open.push(null)
    else if (c === 0x7d || c === 0x5d) open.pop()
    else if (c === 0x2d || (c >= 0x30 && c <= 0x39)) {
      let end = i + 1
      while (end < n && isNumberChar(text.charCodeAt(end))) end++
      const token = text.slice(i, end)
      if (!exactDouble(token))
        return `the number ${clip(token)} is not exactly a double (send it as a string)`
      i = end
      continue
    }
    i++
  }
  return null
}

const QUOTE = 0x22
const COLON = 0x3a
// A high surrogate not followed by a low one, or a low one not preceded by a high one.
const UNPAIRED_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/

/** The index of the quote that closes the string opened at `start` (an odd run of backslashes escapes one). */
function closingQuote(text: string, start: number): number {
  let end = start
  for (;;) {
    end = text.indexOf('"', end + 1)
    let slashes = 0
    while (text.charCodeAt(end - 1 - slashes) === 0x5c) slashes++
    if (slashes % 2 === 0) return end
  }
}

const isSpace = (c: number) => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09
const isNumberChar = (c: number) =>
  (c >= 0x30 && c <= 0x39) || c === 0x2e || c === 0x65 || c === 0x45 || c === 0x2b || c === 0x2d

/** A token as a refusal quotes it: at most 40 characters. */
export const clip = (token: string) => (token.length > 40 ? `${token.slice(0, 40)}…` : token)

/**
 * Longer than any number a double's shortest form needs (17 digits, a sign, a point and an
 * exponent); beyond it a token is refused unread, so no number costs more than this to judge.
 */
const MAX_NUMBER_LENGTH = 400

/**
 * Whether a JSON number token writes the same decimal value as the shortest form of the double
 * it parses to, the value the gate reads and templates (`String(n)`). `12345678901234567891`,
 * `1e400`, and `2^70` written out in full are not: the first two name another value, the last
 * is rendered `1.1805916207174113e+21`, which a server reading big integers does not see.
 */
export function exactDouble(token: string): boolean {
  if (token.length > MAX_NUMBER_LENGTH) return false
  const value = Number(token)
  if (!Number.isFinite(value)) return false
  const shortest = String(value)
  // The common case: the token is the double's own shortest form.
  if (shortest === token) return true
  return sameDecimal(decimal(token), decimal(shortest))
}

interface Decimal {
  negative: boolean
  /** Significant digits, no leading or trailing zeros; empty for zero. */
  digits: string
  /** The value is `digits × 10^exponent`. */
  exponent: number
}

function decimal(s: string): Decimal {
  const m = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/.exec(s)
  if (m === null) throw new Error(`not a JSON number: ${s}`)
  const fraction = m[3] ?? ''
  let digits = (m[2] as string) + fraction
  let exponent = Number(m[4] ?? 0) - fraction.length
  // By index, not by a regex: `/0+$/` on `10…01` tries every run of zeros to its end (quadratic).
  let start = 0
  while (start < digits.length && digits.charCodeAt(start) === 0x30) start++
  let end = digits.length
  while (end > start && digits.charCodeAt(end - 1) === 0x30) end--
  exponent += digits.length - end
  digits = digits.slice(start, end)
  return { negative: m[1] === '-', digits, exponent }
}

function sameDecimal(a: Decimal, b: Decimal): boolean {
  // Zero is zero whatever its sign or exponent: `-0`, `0.0` and `0e5` are one value to a decimal reader.
  if (a.digits === '' || b.digits === '') return a.digits === b.digits
  return a.negative === b.negative && a.digits === b.digits && a.exponent === b.exponent
}
