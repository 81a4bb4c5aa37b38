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

function serialize(value: unknown): string {
  if (value === null) return 'null'
  switch (typeof value) {
    case 'boolean':
      return value ? 'true' : 'false'
    case 'number':
      if (!Number.isFinite(value)) throw new TypeError('JCS: non-finite number')
      return JSON.stringify(value)
    case 'string':
      return JSON.stringify(value)
    case 'object': {
      if (Array.isArray(value)) {
        return `[${value.map((v) => (v === undefined || typeof v === 'function' ? 'null' : serialize(v))).join(',')}]`
      }
      const obj = value as Record<string, unknown>
      const keys = Object.keys(obj).sort()
      const parts: string[] = []
      for (const k of keys) {
        const v = obj[k]
        if (v === undefined || typeof v === 'function') continue
        parts.push(`${JSON.stringify(k)}:${serialize(v)}`)
      }
      return `{${parts.join(',')}}`
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
