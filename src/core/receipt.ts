import { canonicalBody, chainHashOfText, GENESIS_HASH } from './receipt-chain.js'

export const RECEIPT_KINDS = [
  'CHECK',
  'REVOKE',
  'REINSTATE',
  'GRANT',
  'PRINCIPAL_CREATE',
  'PRINCIPAL_UPDATE',
  'PRINCIPAL_DELETE',
  'VERB_CREATE',
  'VERB_UPDATE',
  'POLICY_UPDATE',
  'EXECUTE',
  'ACTION_STAGED',
  'ACTION_APPROVED',
  'KEY_ISSUED',
  // Added to contract §5: changes to the other credentials (sponsor token, TOTP, invite
  // codes, badge tokens) are administrative changes, so they are on record too.
  'CREDENTIAL_ISSUED',
  'CREDENTIAL_REVOKED',
  // Enrolled systems are decision state like policies: each change is on record.
  'SYSTEM_CREATE',
  'SYSTEM_UPDATE',
  'SYSTEM_DELETE',
  // A refused approval code (wrong, replayed, not enrolled) or a locked attempt: guessing is on record.
  'APPROVAL_FAILED',
  // A pending action a human refused (portal or API): it never runs.
  'ACTION_DISMISSED',
  // Portal sign-ins, refused sign-ins and sign-outs: who held a portal session, and who tried.
  'PORTAL_SIGN_IN',
  'PORTAL_SIGN_IN_FAILED',
  'PORTAL_SIGN_OUT',
] as const

export type ReceiptKind = (typeof RECEIPT_KINDS)[number]
export type ReceiptDecision = 'ALLOW' | 'DENY' | 'STEP_UP' | 'REVOKE'

/** A receipt before it joins the chain: everything but seq, prevHash and hash. */
export interface ReceiptDraft {
  receiptId: string
  tenantId: string
  kind: ReceiptKind
  decision: ReceiptDecision | null
  verb: string | null
  requestedVerb: string | null
  target: string | null
  environment: string | null
  principalId: string | null
  principalName: string | null
  keyId: string | null
  reason: string | null
  policyVersion: number | null
  detail: Record<string, unknown>
  createdAt: number
}

/** A chained receipt (contract §5). */
export interface Receipt extends ReceiptDraft {
  seq: number
  prevHash: string
  hash: string
}

export interface ChainHead {
  seq: number
  hash: string
}

export const EMPTY_HEAD: ChainHead = { seq: 0, hash: GENESIS_HASH }

const NULLABLE = [
  'decision',
  'verb',
  'requestedVerb',
  'target',
  'environment',
  'principalId',
  'principalName',
  'keyId',
  'reason',
  'policyVersion',
] as const

/**
 * Fills in the optional fields of a draft with nulls, so every receipt has the full shape: a
 * field given as `undefined` is null too (canonical JSON would drop it, and a receipt without
 * it could be stored, hashed, and never served again).
 */
export function draft(
  fields: Pick<ReceiptDraft, 'receiptId' | 'tenantId' | 'kind' | 'createdAt'> & Partial<ReceiptDraft>,
): ReceiptDraft {
  const d = { ...fields } as ReceiptDraft
  for (const k of NULLABLE) if (d[k] === undefined) (d as unknown as Record<string, null>)[k] = null
  if (d.detail === undefined) d.detail = {}
  return d
}

/** Joins drafts onto a chain head, in order. Pure: the caller owns locking the head. */
export function chainReceipts(
  head: ChainHead,
  drafts: readonly ReceiptDraft[],
): { receipts: Receipt[]; bodies: string[]; head: ChainHead } {
  const receipts: Receipt[] = []
  const bodies: string[] = []
  let { seq, hash } = head
  for (const d of drafts) {
    seq += 1
    const body: Omit<Receipt, 'hash'> & { hash?: string } = { ...d, seq, prevHash: hash }
    // Canonicalised once: the text that is hashed is the text that is stored.
    const text = canonicalBody(body)
    const next = chainHashOfText(hash, text)
    bodies.push(text)
    // The hash joins the same object once the body is canonical: no second copy per receipt.
    body.hash = next
    receipts.push(body as Receipt)
    hash = next
  }
  return { receipts, bodies, head: { seq, hash } }
}
