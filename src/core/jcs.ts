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
      if (keys.length > 1) keys.sort(byCodeUnits)
      let out = '{'
      let first = true
      for (const k of keys) {
        const v = obj[k]
        if (v === undefined || typeof v === 'function') continue
        out += `${first ? '' : ','}${quote(k)}:${serialize(v)}`
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
