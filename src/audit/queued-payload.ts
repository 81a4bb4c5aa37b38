import { NULLABLE_TEXT_MEMBERS, RECEIPT_DECISIONS, RECEIPT_KINDS } from '../core/receipt.js'
import type { DurablePayload } from '../store/ports/hot-store.js'

const KINDS: ReadonlySet<unknown> = new Set(RECEIPT_KINDS)
const DECISIONS: ReadonlySet<unknown> = new Set([...RECEIPT_DECISIONS, null])

const nullableString = (v: unknown) => v === undefined || v === null || typeof v === 'string'
const plainObject = (v: unknown) => typeof v === 'object' && v !== null && !Array.isArray(v)

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
  }
  for (const a of actions as unknown[]) {
    if (!plainObject(a)) return 'an action is not an object'
    if ((a as Record<string, unknown>).tenantId !== tenantId)
      return "an action of another tenant than the stream's"
  }
  return null
}
