/**
 * RFC 8785 JSON Canonicalization Scheme.
 *
 * ECMAScript's own number and string serialisation is what the RFC specifies, so
 * JSON.stringify does the leaf work; this function only fixes member order
 * (UTF-16 code-unit order, which is what Array.prototype.sort does for strings).
 */
export function canonicalJson(value: unknown): string {
  return serialize(value)
}

/** UTF-16 code-unit order (RFC 8785 §3.2.3); a comparator is faster than sort()'s default. */
const byCodeUnits = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0)

/** What JSON.stringify would escape in a string: quote, backslash, controls and surrogates. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are exactly what must be escaped
const NEEDS_ESCAPE = /["\\\u0000-\u001f\ud800-\udfff]/

/** Most strings need no escaping; quoting them directly skips a native call per string. */
function quote(s: string): string {
  return NEEDS_ESCAPE.test(s) ? JSON.stringify(s) : `"${s}"`
}

/**
 * Most keys come from a small fixed set (receipt fields): each is quoted once. Keys an agent
 * chose (tool parameters) may be anything, so only short ones are kept, and only so many.
 */
const QUOTED_KEYS = new Map<string, string>()
const MAX_QUOTED_KEYS = 4096
const MAX_QUOTED_KEY_LENGTH = 64

function quoteKey(k: string): string {
  let q = QUOTED_KEYS.get(k)
  if (q === undefined) {
    q = quote(k)
    if (k.length <= MAX_QUOTED_KEY_LENGTH && QUOTED_KEYS.size < MAX_QUOTED_KEYS) QUOTED_KEYS.set(k, q)
  }
  return q
}

/** Objects the code builds in order need no sort; one pass tells. */
function isSorted(keys: string[]): boolean {
  for (let i = 1; i < keys.length; i++) if ((keys[i - 1] as string) > (keys[i] as string)) return false
  return true
}

// String concatenation rather than arrays and join: receipts are hashed on every append.
function serialize(value: unknown): string {
  if (value === null) return 'null'
  switch (typeof value) {
    case 'boolean':
      return value ? 'true' : 'false'
    case 'number':
      if (!Number.isFinite(value)) throw new TypeError('JCS: non-finite number')
      return JSON.stringify(value)
    case 'string':
      return quote(value)
    case 'object': {
      if (Array.isArray(value)) {
        let out = '['
        for (let i = 0; i < value.length; i++) {
          const v: unknown = value[i]
          if (i > 0) out += ','
          out += v === undefined || typeof v === 'function' ? 'null' : serialize(v)
        }
        return `${out}]`
      }
      const obj = value as Record<string, unknown>
      const keys = Object.keys(obj)
      if (keys.length > 1 && !isSorted(keys)) keys.sort(byCodeUnits)
      let out = '{'
      let first = true
      for (const k of keys) {
        const v = obj[k]
        if (v === undefined || typeof v === 'function') continue
        out += `${first ? '' : ','}${quoteKey(k)}:${serialize(v)}`
        first = false
      }
      return `${out}}`
    }
    default:
      throw new TypeError(`JCS: cannot serialise ${typeof value}`)
  }
}

/**
 * True when `text` is exactly the canonical form of `value`. A value JCS cannot express
 * (a non-finite number parsed from `1e999`, say) is simply not canonical: verifiers must
 * report tampered input, never throw on it.
 */
export function isCanonicalText(value: unknown, text: string): boolean {
  try {
    return canonicalJson(value) === text
  } catch {
    return false
  }
}
