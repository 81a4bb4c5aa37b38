/**
 * The pseudo-tool a proxy-staged action replays on approval: the exact upstream request
 * (method, path, content type and body), sent to the system's fixed origin.
 */
export const HTTP_REPLAY_TOOL = '@http'

export interface HttpReplayParams {
  method: string
  path: string
  contentType: string | null
  /** base64 of the exact body bytes. */
  body: string
  bodySha256: string
  [key: string]: unknown
}
