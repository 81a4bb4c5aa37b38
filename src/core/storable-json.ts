import { MAX_JSON_DEPTH } from './json-depth.js'

/**
 * What JSON may hold yet the system of record cannot: Postgres text refuses NUL, jsonb
 * refuses unpaired surrogates, canonical JSON has no non-finite numbers (`1e400` parses
 * to Infinity), and deep nesting exhausts recursion. Refused at the edge with a 400, so
 * none of them can reach storage as a 500.
 */
export function unstorableJson(value: unknown): string | null {
  const stack: [unknown, number][] = [[value, 0]]
  while (stack.length > 0) {
    const [v, depth] = stack.pop() as [unknown, number]
    if (typeof v === 'string') {
      if (!isStorableString(v)) return 'strings may not contain NUL characters or unpaired surrogates'
    } else if (typeof v === 'number') {
      if (!Number.isFinite(v)) return 'numbers must be finite'
    } else if (v !== null && typeof v === 'object') {
      if (depth >= MAX_JSON_DEPTH) return `nesting deeper than ${MAX_JSON_DEPTH} levels`
      if (Array.isArray(v)) for (const item of v) stack.push([item, depth + 1])
      else
        for (const [k, item] of Object.entries(v)) {
          if (!isStorableString(k)) return 'keys may not contain NUL characters or unpaired surrogates'
          stack.push([item, depth + 1])
        }
    }
  }
  return null
}

/**
 * The strings alone (values and keys): what a proxy's call readers check of the arguments a
 * receipt is read off, whose depth and numbers they bound themselves.
 */
export function unstorableStrings(value: unknown): string | null {
  const stack: unknown[] = [value]
  while (stack.length > 0) {
    const v = stack.pop()
    if (typeof v === 'string') {
      if (!isStorableString(v)) return 'strings may not contain NUL characters or unpaired surrogates'
    } else if (v !== null && typeof v === 'object') {
      for (const [k, item] of Array.isArray(v) ? v.entries() : Object.entries(v)) {
        if (typeof k === 'string' && !isStorableString(k))
          return 'keys may not contain NUL characters or unpaired surrogates'
        stack.push(item)
      }
    }
  }
  return null
}

export function isStorableString(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    if (c === 0) return false
    if (c >= 0xd800 && c <= 0xdbff) {
      const next = s.charCodeAt(i + 1)
      if (!(next >= 0xdc00 && next <= 0xdfff)) return false
      i++
    } else if (c >= 0xdc00 && c <= 0xdfff) return false
  }
  return true
}
