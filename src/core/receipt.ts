import { canonicalJson } from './jcs.js'
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
export const RECEIPT_DECISIONS = ['ALLOW', 'DENY', 'STEP_UP', 'REVOKE'] as const
export type ReceiptDecision = (typeof RECEIPT_DECISIONS)[number]

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

/** The members a draft may leave out that hold text (null when left out). */
export const NULLABLE_TEXT_MEMBERS = [
  'verb',
  'requestedVerb',
  'target',
  'environment',
  'principalId',
  'principalName',
  'keyId',
  'reason',
] as const

const NULLABLE = ['decision', ...NULLABLE_TEXT_MEMBERS, 'policyVersion'] as const

/**
 * Fills in the optional fields of a draft with nulls, so every receipt has the full shape: a
 * field given as `undefined` is null too (canonical JSON would drop it, and a receipt without
 * it could be stored, hashed, and never served again).
 */
export function draft(
  fields: Pick<ReceiptDraft, 'receiptId' | 'tenantId' | 'kind' | 'createdAt'> & Partial<ReceiptDraft>,
): ReceiptDraft {
  // Every member present from the start: adding the missing ones one by one to a copy took
  // V8 7 µs a draft (a new shape per member), against 0.2 µs for this.
  const d: ReceiptDraft = {
    decision: null,
    verb: null,
    requestedVerb: null,
    target: null,
    environment: null,
    principalId: null,
    principalName: null,
    keyId: null,
    reason: null,
    policyVersion: null,
    detail: {},
    ...fields,
  }
  // A member given as undefined is null too (the spread copied the undefined over the default).
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
    // Canonicalised once: the text that is hashed is the text that is stored.
    // Each member is read once, into the object that is both hashed and returned.
    const plain = plainDraft(d)
    const body: Omit<Receipt, 'hash'> & { hash?: string } = plain
      ? receiptOf(d, seq, hash)
      : { ...d, seq, prevHash: hash }
    const text = plain ? bodyText(body as Receipt) : canonicalBody(body)
    const next = chainHashOfText(hash, text)
    bodies.push(text)
    // The hash joins the same object once the body is canonical: no second copy per receipt.
    body.hash = next
    receipts.push(body as Receipt)
    hash = next
  }
  return { receipts, bodies, head: { seq, hash } }
}

/**
 * A receipt body's members in JCS order (UTF-16 code units), `hash` excluded. Every receipt
 * is canonicalised on its way into the chain; with the members known and already in order,
 * the body's text is written straight out instead of collecting, sorting and visiting keys.
 */
export const BODY_MEMBERS = [
  'createdAt',
  'decision',
  'detail',
  'environment',
  'keyId',
  'kind',
  'policyVersion',
  'prevHash',
  'principalId',
  'principalName',
  'reason',
  'receiptId',
  'requestedVerb',
  'seq',
  'target',
  'tenantId',
  'verb',
] as const satisfies readonly (keyof Omit<Receipt, 'hash'>)[]

/** The members a draft may have: a body's, less what chaining adds (`seq`, `prevHash`). */
export const DRAFT_MEMBERS: ReadonlySet<string> = new Set(
  BODY_MEMBERS.filter((k) => k !== 'seq' && k !== 'prevHash'),
)
const MEMBER_PREFIX = BODY_MEMBERS.map((k, i) => `${i === 0 ? '' : ','}${JSON.stringify(k)}:`)

/**
 * A draft with no member but a draft's own: the fast path's text is then exactly what
 * canonicalJson gives for the body (test/unit/receipt-body.test.ts holds it to that). A draft
 * with anything else (an older proxy's extra field, say) takes the generic path, unchanged.
 */
function plainDraft(d: ReceiptDraft): boolean {
  let n = 0
  for (const k in d) {
    // An inherited member (which a spread would not copy) makes the draft not plain either.
    if (!DRAFT_MEMBERS.has(k) || !Object.hasOwn(d, k)) return false
    n += 1
  }
  return n === DRAFT_MEMBERS.size
}

/** The body's text, from a receipt built by receiptOf (plain data, its hash not yet set). */
function bodyText(r: Receipt): string {
  let out = '{'
  let first = true
  for (let i = 0; i < BODY_MEMBERS.length; i++) {
    const v: unknown = r[BODY_MEMBERS[i] as (typeof BODY_MEMBERS)[number]]
    // As canonicalJson does: a member whose value is undefined or a function is left out.
    if (v === undefined || typeof v === 'function') continue
    const prefix = MEMBER_PREFIX[i] as string
    out += (first && i > 0 ? prefix.slice(1) : prefix) + canonicalJson(v)
    first = false
  }
  return `${out}}`
}

/**
 * The receipt as one object literal: every receipt has the same shape (fast to build and to
 * read). Its hash is '' until the body is hashed.
 */
function receiptOf(d: ReceiptDraft, seq: number, prevHash: string): Receipt {
  return {
    receiptId: d.receiptId,
    tenantId: d.tenantId,
    kind: d.kind,
    decision: d.decision,
    verb: d.verb,
    requestedVerb: d.requestedVerb,
    target: d.target,
    environment: d.environment,
    principalId: d.principalId,
    principalName: d.principalName,
    keyId: d.keyId,
    reason: d.reason,
    policyVersion: d.policyVersion,
    detail: d.detail,
    createdAt: d.createdAt,
    seq,
    prevHash,
    hash: '',
  }
}
