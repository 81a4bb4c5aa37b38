/**
 * The pseudo-tool a proxy-staged action replays on approval: the exact upstream request
 * (method, path, content type and body), sent to the system's fixed origin.
 */
export const HTTP_REPLAY_TOOL = '@http'

/**
 * Request headers a staged request keeps for its replay: the protocol's own, without which an
 * MCP server cannot take the call (its session, its version, the answer types it needs), and
 * the body's content encoding, without which its gzip bytes would be sent as what they are not
 * (found in review). Never a credential: nothing else the agent sent is kept.
 */
export const REPLAYED_HEADERS = [
  'accept',
  'mcp-session-id',
  'mcp-protocol-version',
  'content-encoding',
] as const

export interface HttpReplayParams {
  method: string
  path: string
  contentType: string | null
  /** REPLAYED_HEADERS the agent sent, lower-case; absent when none. */
  headers?: Record<string, string>
  /** base64 of the exact body bytes. */
  body: string
  bodySha256: string
  [key: string]: unknown
}
