import type { CompiledSystem } from './snapshot.js'

/**
 * Whether a request goes to a body-aware endpoint: a POST to an MCP system's endpoint (its
 * GET, an event stream, and DELETE, the end of a session, are plain requests), a POST, GET or
 * HEAD to a GraphQL system's (servers run a HEAD as the GET it stands for).
 */
export function callProtocolOf(s: CompiledSystem, method: string, path: string): 'mcp' | 'graphql' | null {
  if (!s.endpoint?.match(path.split('?')[0] as string)) return null
  if (s.record.kind === 'mcp') return method === 'POST' ? 'mcp' : null
  if (s.record.kind === 'graphql')
    return method === 'POST' || method === 'GET' || method === 'HEAD' ? 'graphql' : null
  return null
}
