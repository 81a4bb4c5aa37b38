/** Past these a schema is refused: ajv compiles it synchronously, on the event loop every tenant shares. */
const MAX_NODES = 1_000
const MAX_DEPTH = 32

/**
 * Keywords a tool's params schema may not hold. `$async` makes ajv's validator return a promise,
 * which reads as "valid" to a synchronous caller and rejects unhandled when it is not (the
 * process exits). `$id` registers the schema in the ajv instance the registry shares across
 * tenants, so a second tool naming the same id fails to compile, another tenant's included.
 * `uniqueItems` compares every pair of items: quadratic in an agent's array.
 */
const REFUSED: ReadonlyMap<string, string> = new Map([
  ['$async', '$async is not supported (params are checked synchronously)'],
  ['$id', '$id is not supported (a params schema is inline: name nothing)'],
  ['uniqueItems', 'uniqueItems is not supported (its cost grows with the square of the array)'],
])

/**
 * Why a params schema's shape is refused before ajv sees it, or null. `stored`: a schema
 * enrolled before these rules, which still compiles as long as it is not unsafe to run
 * (`uniqueItems` is only costly: such a tool keeps working until its system is changed).
 */
export function paramsSchemaShapeProblem(schema: unknown, opts: { stored?: boolean } = {}): string | null {
  let nodes = 0
  const walk = (v: unknown, depth: number): string | null => {
    if (typeof v !== 'object' || v === null) return null
    if (depth > MAX_DEPTH) return `nested deeper than ${MAX_DEPTH} levels`
    nodes += 1
    if (nodes > MAX_NODES) return `more than ${MAX_NODES} objects and arrays`
    for (const [k, x] of Array.isArray(v) ? v.entries() : Object.entries(v)) {
      if (typeof k === 'string' && !Array.isArray(v)) {
        const refused = REFUSED.get(k)
        // Also a property of that name under `properties`: rare in tool params, and refused simply.
        if (refused !== undefined && (k !== 'uniqueItems' || (x === true && !opts.stored))) return refused
      }
      const problem = walk(x, depth + 1)
      if (problem !== null) return problem
    }
    return null
  }
  return walk(schema, 0)
}
