/**
 * The JSON Patch (RFC 6902) operations the injector emits, JSON Pointer (RFC 6901)
 * escaping, and a small applier for the same subset, used to preview a mutation and to
 * prove in tests that a patch is idempotent.
 */

export type JsonPatchOp =
  | { op: 'add'; path: string; value: unknown }
  | { op: 'replace'; path: string; value: unknown }

/** A JSON Pointer from raw segments: `~` becomes `~0` and `/` becomes `~1`. */
export function pointer(...segments: (string | number)[]): string {
  return segments.map((s) => `/${String(s).replace(/~/g, '~0').replace(/\//g, '~1')}`).join('')
}

function unescapeSegment(segment: string): string {
  return segment.replace(/~1/g, '/').replace(/~0/g, '~')
}

function clone<T>(value: T): T {
  return structuredClone(value)
}

/** Applies add/replace operations to a copy of `doc`; throws on a path that does not resolve. */
export function applyJsonPatch<T>(doc: T, ops: readonly JsonPatchOp[]): T {
  const root = clone(doc) as unknown
  for (const op of ops) {
    if (!op.path.startsWith('/')) throw new Error(`invalid pointer ${op.path}`)
    const segments = op.path.slice(1).split('/').map(unescapeSegment)
    const last = segments.pop() as string
    let parent: unknown = root
    for (const s of segments) {
      if (Array.isArray(parent)) parent = parent[Number(s)]
      else if (parent && typeof parent === 'object') parent = (parent as Record<string, unknown>)[s]
      else parent = undefined
      if (parent === undefined) throw new Error(`path ${op.path} does not exist`)
    }
    const value = clone(op.value)
    if (Array.isArray(parent)) {
      const index = last === '-' ? parent.length : Number(last)
      if (!Number.isInteger(index) || index < 0 || index > parent.length)
        throw new Error(`index ${last} out of range at ${op.path}`)
      if (op.op === 'add') parent.splice(index, 0, value)
      else {
        if (index >= parent.length) throw new Error(`nothing to replace at ${op.path}`)
        parent[index] = value
      }
    } else if (parent && typeof parent === 'object') {
      const obj = parent as Record<string, unknown>
      if (op.op === 'replace' && !(last in obj)) throw new Error(`nothing to replace at ${op.path}`)
      obj[last] = value
    } else {
      throw new Error(`path ${op.path} does not exist`)
    }
  }
  return root as T
}
