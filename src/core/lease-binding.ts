import { canonicalJson } from './jcs.js'
import { sha256Hex } from './secret-hash.js'

/**
 * The byte-exact binding of a lease or ALLOW token to one upstream request (contract §3):
 * sha256(method "\n" path "\n" JCS(body)), with an absent body as the empty string.
 * Method and path are compared as sent: `POST` is not `post`, `/v1/a` is not `/v1/a/`.
 */
export function requestBinding(method: string, path: string, body: unknown): string {
  const canonical = body === undefined || body === null ? '' : canonicalJson(body)
  return sha256Hex(`${method}\n${path}\n${canonical}`)
}

/**
 * The same binding over exact body bytes instead of JCS: a write the proxy staged is replayed
 * on approval byte for byte, whatever its content type.
 */
export function rawRequestBinding(method: string, path: string, body: Uint8Array): string {
  return sha256Hex(Buffer.concat([Buffer.from(`${method}\n${path}\n`), body]))
}
