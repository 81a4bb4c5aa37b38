import type { KeyObject } from 'node:crypto'
import { publicKeyId, signEd25519, verifyEd25519 } from './ed25519.js'
import { canonicalJson } from './jcs.js'

/** A tenant's chain head at a moment: `hash` is the hash of receipt `seq`. */
export interface Checkpoint {
  tenantId: string
  seq: number
  hash: string
  at: number
}

/** A checkpoint with its Ed25519 signature (base64) and the signing key's id. */
export interface SignedCheckpoint extends Checkpoint {
  signature: string
  keyId: string
}

export const CHECKPOINT_ALGORITHM = 'Ed25519'

/** The signed message: the JCS text of exactly `{tenantId, seq, hash, at}`, as UTF-8. */
export function checkpointMessage(cp: Checkpoint): Buffer {
  return Buffer.from(canonicalJson({ tenantId: cp.tenantId, seq: cp.seq, hash: cp.hash, at: cp.at }), 'utf8')
}

export function signCheckpoint(privateKey: KeyObject, cp: Checkpoint): SignedCheckpoint {
  return {
    tenantId: cp.tenantId,
    seq: cp.seq,
    hash: cp.hash,
    at: cp.at,
    signature: signEd25519(privateKey, checkpointMessage(cp)),
    keyId: publicKeyId(privateKey),
  }
}

/** True only when `keyId` names this key and the signature over the checkpoint verifies with it. */
export function checkpointSignatureValid(publicKey: KeyObject, cp: SignedCheckpoint): boolean {
  if (cp.keyId !== publicKeyId(publicKey)) return false
  return verifyEd25519(publicKey, checkpointMessage(cp), cp.signature)
}
