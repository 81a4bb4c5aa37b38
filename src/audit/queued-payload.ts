import { DRAFT_MEMBERS, NULLABLE_TEXT_MEMBERS, RECEIPT_DECISIONS, RECEIPT_KINDS } from '../core/receipt.js'
import type { DurablePayload } from '../store/ports/hot-store.js'

const KINDS: ReadonlySet<unknown> = new Set(RECEIPT_KINDS)
const DECISIONS: ReadonlySet<unknown> = new Set([...RECEIPT_DECISIONS, null])

const nullableString = (v: unknown) => v === undefined || v === null || typeof v === 'string'
const plainObject = (v: unknown) => typeof v === 'object' && v !== null && !Array.isArray(v)

// What Postgres cannot hold in a text column or a jsonb value: NUL, and a UTF-16 surrogate
// without its pair. The statement would fail, and its whole batch (other tenants' appends
// included, in a shared group commit) with it.
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/
const UNSTORABLE = { test: (s: string) => s.includes('\u0000') || LONE_SURROGATE.test(s) }

/** The first string (a value or a key) in `v` that Postgres cannot store, or null. */
function unstorable(v: unknown, depth = 0): string | null {
  if (typeof v === 'string') return UNSTORABLE.test(v) ? v : null
  if (typeof v !== 'object' || v === null || depth > 64) return null
  for (const [k, x] of Array.isArray(v) ? v.entries() : Object.entries(v)) {
    if (typeof k === 'string' && UNSTORABLE.test(k)) return k
    const found = unstorable(x, depth + 1)
    if (found !== null) return found
  }
  return null
}

const ACTION_TEXT = [
  'actionId',
  'systemId',
  'tool',
  'verb',
  'principalId',
  'keyId',
  'stagedReceiptId',
] as const
const ACTION_NULLABLE_TEXT = ['target', 'environment', 'revertOf'] as const

/**
 * Why a payload queued in a tenant's stream cannot go into that tenant's audit log, or null when
 * it can. Queued payloads are parsed, not validated (proxies wrote them), so one of another
 * shape (a proxy of another version, a forged entry) would otherwise reach Postgres, fail its
 * whole batch at every retry and keep the good receipts read with it out of the log. Checked per
 * field with typeof, not a schema: every drained receipt passes here.
 */
export function unfitPayload(tenantId: string, payload: unknown): string | null {
  if (!plainObject(payload)) return 'the payload is not an object'
  const { receipts, actions } = payload as Partial<DurablePayload>
  if (!Array.isArray(receipts) || !Array.isArray(actions)) return 'receipts or actions is not a list'
  for (const r of receipts as unknown[]) {
    if (!plainObject(r)) return 'a receipt is not an object'
    const d = r as Record<string, unknown>
    if (d.tenantId !== tenantId) return "a receipt of another tenant than the stream's"
    if (typeof d.receiptId !== 'string' || d.receiptId === '') return 'a receipt without a receiptId'
    if (!KINDS.has(d.kind)) return `receipt ${d.receiptId}: unknown kind`
    if (!DECISIONS.has(d.decision ?? null)) return `receipt ${d.receiptId}: unknown decision`
    if (!Number.isSafeInteger(d.createdAt) || (d.createdAt as number) < 0)
      return `receipt ${d.receiptId}: createdAt is not a time`
    if (!(d.policyVersion === undefined || d.policyVersion === null || Number.isSafeInteger(d.policyVersion)))
      return `receipt ${d.receiptId}: policyVersion is not a version`
    for (const k of NULLABLE_TEXT_MEMBERS)
      if (!nullableString(d[k])) return `receipt ${d.receiptId}: ${k} is not a string`
    if (!(d.detail === undefined || plainObject(d.detail)))
      return `receipt ${d.receiptId}: detail is not an object`
    // A member of its own (`hash`, `type`) would be hashed into the body and then overwritten
    // in the stored row and the export: a chain that verifies online and not offline.
    for (const k of Object.keys(d))
      if (!DRAFT_MEMBERS.has(k)) return `receipt ${d.receiptId}: unknown member ${k}`
    if (unstorable(d) !== null)
      return `receipt ${d.receiptId}: a string Postgres cannot store (NUL, lone surrogate)`
  }
  for (const a of actions as unknown[]) {
    if (!plainObject(a)) return 'an action is not an object'
    const x = a as Record<string, unknown>
    if (x.tenantId !== tenantId) return "an action of another tenant than the stream's"
    for (const k of ACTION_TEXT)
      if (typeof x[k] !== 'string' || x[k] === '') return `an action without its ${k}`
    for (const k of ACTION_NULLABLE_TEXT)
      if (!nullableString(x[k])) return `action ${x.actionId}: ${k} is not a string`
    if (!plainObject(x.params)) return `action ${x.actionId}: params is not an object`
    for (const k of ['createdAt', 'expiresAt'] as const)
      if (!Number.isSafeInteger(x[k]) || (x[k] as number) < 0)
        return `action ${x.actionId}: ${k} is not a time`
    const v = x.systemVersion
    if (
      !(
        v === undefined ||
        v === null ||
        (Number.isSafeInteger(v) && (v as number) > 0 && (v as number) < 2 ** 31)
      )
    )
      return `action ${x.actionId}: systemVersion is not a version`
    if (unstorable(x) !== null)
      return `action ${x.actionId}: a string Postgres cannot store (NUL, lone surrogate)`
  }
  return null
}
