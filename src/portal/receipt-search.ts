import type { Receipt } from '../core/receipt.js'
import type { Stores } from '../store/ports/index.js'
import type { ReceiptReader } from '../store/ports/receipt-reader.js'
import { type ReceiptQuery, systemOf } from './pages/audit.js'

/** How far back a search looks, and how many matches it shows. */
export const SEARCH_SCAN = 5000
export const SEARCH_SHOW = 200

const has = (v: string | null | undefined, q: string | undefined) =>
  !q || (v ?? '').toLowerCase() === q.trim().toLowerCase()
const contains = (v: string | null | undefined, q: string | undefined) =>
  !q || (v ?? '').toLowerCase().includes(q.trim().toLowerCase())

export function matches(r: Receipt, q: ReceiptQuery): boolean {
  return (
    has(r.kind, q.kind) &&
    has(r.decision, q.decision) &&
    has(r.verb, q.verb) &&
    (has(r.principalId, q.principal) || has(r.principalName, q.principal)) &&
    has(systemOf(r), q.system) &&
    (contains(r.target, q.text) || contains(r.reason, q.text))
  )
}

/** The newest receipts that match, newest first, from the last SEARCH_SCAN of the log. */
export async function searchReceipts(
  deps: { stores: Stores; reader: ReceiptReader },
  tenantId: string,
  q: ReceiptQuery,
): Promise<{ results: Receipt[]; scanned: number; headSeq: number }> {
  const head = await deps.reader.head(tenantId)
  const from = Math.max(0, head.seq - SEARCH_SCAN)
  const results: Receipt[] = []
  let scanned = 0
  // Pages of 1000 from the newest end backwards, until enough matched.
  for (let to = head.seq; to > from && results.length < SEARCH_SHOW; to -= 1000) {
    const after = Math.max(from, to - 1000)
    const page = await deps.stores.receipts.list(tenantId, after, to - after)
    scanned += page.length
    for (let i = page.length - 1; i >= 0 && results.length < SEARCH_SHOW; i--) {
      const r = page[i] as Receipt
      if (matches(r, q)) results.push(r)
    }
  }
  return { results, scanned, headSeq: head.seq }
}
