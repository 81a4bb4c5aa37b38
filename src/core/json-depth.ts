/**
 * How deep JSON from a client may nest, wherever the gate reads it (the control plane's bodies,
 * the proxy's MCP arguments and GraphQL variables). Past this, a recursive walk (JSON.stringify,
 * canonical JSON, jsonb) can exhaust the stack: the value is refused at the edge with a 400.
 */
export const MAX_JSON_DEPTH = 64

/** Whether a parsed JSON value holds objects or arrays nested deeper than `max` levels (iteratively). */
export function nestedDeeperThan(value: unknown, max: number = MAX_JSON_DEPTH): boolean {
  const stack: [unknown, number][] = [[value, 0]]
  while (stack.length > 0) {
    const [v, depth] = stack.pop() as [unknown, number]
    if (v === null || typeof v !== 'object') continue
    if (depth >= max) return true
    for (const item of Array.isArray(v) ? v : Object.values(v)) stack.push([item, depth + 1])
  }
  return false
}
