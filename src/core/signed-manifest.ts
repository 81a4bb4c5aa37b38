import type { KeyObject } from 'node:crypto'
import { signEd25519, verifyEd25519 } from './ed25519.js'
import { canonicalJson } from './jcs.js'

/**
 * A scanner's signed manifest file (docs/audit.md "Manifests"): a JSON object
 * `{tenantId, entries: [{repoId, commitSha, scannerVersion, createdAt}], signature}`.
 * `signature` is Ed25519 (base64) over the UTF-8 JCS text of the object without
 * `signature`, so every other field, present or added, is covered.
 */
export function manifestMessage(document: Record<string, unknown>): Buffer {
  const { signature: _ignored, ...payload } = document
  return Buffer.from(canonicalJson(payload), 'utf8')
}

export function signManifest(
  privateKey: KeyObject,
  payload: Record<string, unknown>,
): Record<string, unknown> {
  return { ...payload, signature: signEd25519(privateKey, manifestMessage(payload)) }
}

export function manifestSignatureValid(publicKey: KeyObject, document: Record<string, unknown>): boolean {
  return (
    typeof document.signature === 'string' &&
    verifyEd25519(publicKey, manifestMessage(document), document.signature)
  )
}
