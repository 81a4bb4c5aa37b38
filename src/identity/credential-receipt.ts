import { newId } from '../core/ids.js'
import { draft, type ReceiptDraft } from '../core/receipt.js'

/** Credentials other than API keys, whose changes are on record (never their secrets). */
export type CredentialName = 'sponsor_token' | 'totp' | 'invite_code' | 'badge_token'

/** The CREDENTIAL_ISSUED / CREDENTIAL_REVOKED receipt of a credential change. */
export function credentialReceipt(input: {
  tenantId: string
  kind: 'CREDENTIAL_ISSUED' | 'CREDENTIAL_REVOKED'
  credential: CredentialName
  at: number
  actor: Record<string, string>
  keyId?: string | null
  detail?: Record<string, unknown>
}): ReceiptDraft {
  return draft({
    receiptId: newId('receipt'),
    tenantId: input.tenantId,
    kind: input.kind,
    createdAt: input.at,
    keyId: input.keyId ?? null,
    detail: { actor: input.actor, credential: input.credential, ...(input.detail ?? {}) },
  })
}
