/**
 * An enrolled system as decisions see it: plain data, carried in the tenant's snapshot.
 * Validation lives at the edges (src/systems/system-definition.ts); these are its shapes.
 */

export type HttpMethod = 'GET' | 'HEAD' | 'OPTIONS' | 'POST' | 'PUT' | 'PATCH' | 'DELETE'

export interface SystemRoute {
  method: HttpMethod
  /** A path pattern: literal segments, `{name}` placeholders, an optional trailing `*`. */
  path: string
  verb: string
  /** Template for the decision target over the path's placeholders. */
  target?: string | undefined
}

export interface SystemTool {
  name: string
  verb: string
  method: HttpMethod
  pathTemplate: string
  /** JSON Schema of the tool's params. */
  params: Record<string, unknown>
  target?: string | undefined
  revert?: { tool: string; params: Record<string, string> } | undefined
}

/** Where the injecting process reads the secret; never the secret itself. */
export interface CredentialRef {
  header: string
  prefix: string
  fromEnv?: string | undefined
  fromFile?: string | undefined
}

/** An MCP tool call (`tools/call` with this tool name) mapped to a verb. */
export interface McpToolRoute {
  /** The tool's name, or a glob (`*` matches any run of characters): `create_*`. */
  name: string
  verb: string
  /** Template over the call's `params.arguments`: `{arguments.repo}`. */
  target?: string | undefined
}

/** A GraphQL root mutation field mapped to a verb. */
export interface GraphqlMutationRoute {
  /** The root mutation field's name (not an alias), or a glob. */
  field: string
  verb: string
  /** Template over the field's arguments, variables substituted: `{input.repositoryId}`. */
  target?: string | undefined
}

export interface McpBinding {
  /** The MCP endpoint path on the upstream (Streamable HTTP). */
  endpoint: string
  tools: McpToolRoute[]
  /** Leave out of `tools/list` answers the tools whose verb this agent's policy denies. */
  filterToolsList: boolean
}

export interface GraphqlBinding {
  endpoint: string
  mutations: GraphqlMutationRoute[]
}

export type SystemKind = 'http' | 'mcp' | 'graphql'

export interface SystemDefinition {
  systemId: string
  /** `http`: writes mapped by method and path. `mcp`/`graphql`: the endpoint's bodies are read and each call mapped. */
  kind: SystemKind
  mcp?: McpBinding | undefined
  graphql?: GraphqlBinding | undefined
  /** A fixed origin, never taken from a request. */
  upstream: string
  credential?: CredentialRef | undefined
  /** PEM certificates the upstream's TLS certificate is verified against instead of the system trust store (https only). */
  caBundle?: string | undefined
  baseUrlEnv?: string | undefined
  reads: 'pass' | 'gate'
  routes: SystemRoute[]
  tools: SystemTool[]
  /**
   * Set by the control plane, never by a definition: the upstream was vetted as public when last
   * changed (an admin's change where private upstreams are not allowed), so every connection to
   * it must reach a public address too (src/systems/public-address-lookup.ts).
   */
  publicOnly?: true | undefined
}

/** A system as the decision state holds it: one tenant's, versioned. */
export interface SystemRecord extends SystemDefinition {
  tenantId: string
  version: number
  createdAt: number
  updatedAt: number
}
