import { chainReceipts, type Receipt, type ReceiptDraft } from '../../core/receipt.js'
import { GENESIS_HASH } from '../../core/receipt-chain.js'
import type { ChainedReceipts, ReceiptStore } from '../ports/audit.js'
import type { SqlHandle } from './sql-handle.js'

/**
 * Postgres channel that wakes receipt streams. The NOTIFY is issued inside the appending
 * transaction, so Postgres delivers it only after commit, and never for a rollback. It is
 * only a wake-up: streams always read seq > cursor from the table.
 */
export const RECEIPTS_CHANNEL = 'writegate_receipts'

interface ReceiptRow {
  body: string
  hash: string
}

/** The stored body is the exact JCS text that was hashed; the receipt is that plus its hash. */
export function receiptFromRow(r: ReceiptRow): Receipt {
  return { ...(JSON.parse(r.body) as Omit<Receipt, 'hash'>), hash: r.hash }
}

/**
 * Set-based and pipelined, so a group-committed batch costs two round trips inside its
 * transaction whether it holds one tenant or fifty: the reads (create missing head rows,
 * lock the heads, find receipts already stored) go out together, then one statement
 * inserts, advances the heads and notifies. Statements on one connection run in the
 * order they were sent, so the head rows exist before they are locked. Needs a
 * transaction's handle (every caller has one): on a pool the reads would go out on
 * different connections.
 */
async function appendReceipts(sql: SqlHandle, drafts: readonly ReceiptDraft[]): Promise<Receipt[]> {
  if (drafts.length === 0) return []
  // Code-unit order here and `collate "C"` below: every transaction takes the head
  // rows in the same order, so concurrent batches never deadlock.
  const tenantIds = [...new Set(drafts.map((d) => d.tenantId))].sort()
  const [, heads, existing] = await Promise.all([
    sql`insert into audit_heads (tenant_id, seq, hash)
        select t, 0, ${GENESIS_HASH} from unnest(${tenantIds}::text[]) as t
        on conflict (tenant_id) do nothing`,
    sql<{ tenant_id: string; seq: number; hash: string }[]>`
      select tenant_id, seq, hash from audit_heads where tenant_id = any(${tenantIds})
      order by tenant_id collate "C" for update`,
    // After the head locks, so this check cannot race another append of the same receipt.
    sql<ReceiptRow[]>`select body, hash from receipts
                      where receipt_id = any(${drafts.map((d) => d.receiptId)})`,
  ])
  const headOf = new Map(heads.map((h) => [h.tenant_id, { seq: Number(h.seq), hash: h.hash }]))
  const all = new Map<string, Receipt>()
  for (const row of existing) {
    const r = receiptFromRow(row)
    all.set(r.receiptId, r)
  }
  const fresh = newDraftsByTenant(drafts, all)
  if (fresh.size === 0) return drafts.map((d) => all.get(d.receiptId) as Receipt)
  // One JSON parameter, not a multi-row VALUES list: one statement text for every batch size,
  // parsed and prepared once per connection (receiptRowsJson).
  const receipts: Receipt[] = []
  const bodies: string[] = []
  const moved: { tenant_id: string; seq: number; hash: string }[] = []
  for (const [tenantId, list] of fresh) {
    const head = headOf.get(tenantId)
    if (!head) throw new Error(`audit head missing for ${tenantId}`)
    const chained = chainReceipts(head, list)
    receipts.push(...chained.receipts)
    bodies.push(...chained.bodies)
    for (const r of chained.receipts) all.set(r.receiptId, r)
    moved.push({ tenant_id: tenantId, seq: chained.head.seq, hash: chained.head.hash })
  }
  // Data-modifying CTEs all run, referenced or not; the NOTIFY is delivered at commit.
  await sql`with inserted as (
              insert into receipts (tenant_id, seq, receipt_id, kind, decision, created_at, key_id, body, hash)
              select tenant_id, seq, receipt_id, kind, decision, created_at, key_id,
                     coalesce(body_text, body::text), hash
              from json_to_recordset(${receiptRowsJson(receipts, bodies)}::text::json)
                as r(tenant_id text, seq bigint, receipt_id text, kind text, decision text,
                     created_at bigint, key_id text, hash text, body json, body_text text)
            ), advanced as (
              update audit_heads h set seq = v.seq, hash = v.hash
              from unnest(${moved.map((m) => m.tenant_id)}::text[], ${moved.map((m) => m.seq)}::bigint[],
                          ${moved.map((m) => m.hash)}::text[]) as v(tenant_id, seq, hash)
              where h.tenant_id = v.tenant_id
              returning h.tenant_id
            )
            select pg_notify(${RECEIPTS_CHANNEL}, tenant_id) from advanced`
  return drafts.map((d) => all.get(d.receiptId) as Receipt)
}

/**
 * The drafts still to append, by tenant in draft order: those whose receiptId is neither stored
 * (`stored`) nor earlier in the batch. Appends are idempotent by receiptId.
 */
export function newDraftsByTenant(
  drafts: readonly ReceiptDraft[],
  stored: ReadonlyMap<string, Receipt>,
): Map<string, ReceiptDraft[]> {
  const fresh = new Map<string, ReceiptDraft[]>()
  const seen = new Set<string>()
  for (const d of drafts) {
    if (stored.has(d.receiptId) || seen.has(d.receiptId)) continue
    seen.add(d.receiptId)
    const list = fresh.get(d.tenantId)
    if (list) list.push(d)
    else fresh.set(d.tenantId, [d])
  }
  return fresh
}

/**
 * The insert's rows as one JSON text (column names as keys). A body is the canonical JSON of
 * its receipt, so it goes in as a JSON value, verbatim: `json` keeps the input text exactly,
 * so `body::text` is the hashed text, and the body is not escaped a second time as a string
 * (the largest cost of building the statement). Postgres's JSON parser refuses some escapes
 * JCS writes (a lone surrogate, NUL), so a body with any `\u` escape goes as a string instead.
 */
export function receiptRowsJson(receipts: readonly Receipt[], bodies: readonly string[]): string {
  let out = '['
  for (let i = 0; i < receipts.length; i++) {
    const r = receipts[i] as Receipt
    const body = bodies[i] as string
    // Every column but the body through JSON.stringify, numbers too: a field of the wrong type
    // (a queued payload is parsed, not validated) is then a value Postgres refuses, never text
    // spliced into the parameter.
    out +=
      `${i === 0 ? '' : ','}{"tenant_id":${json(r.tenantId)},"seq":${json(r.seq)},` +
      `"receipt_id":${json(r.receiptId)},"kind":${json(r.kind)},"decision":${json(r.decision)},` +
      `"created_at":${json(r.createdAt)},"key_id":${json(r.keyId)},"hash":${json(r.hash)},` +
      (body.includes('\\u') ? `"body_text":${JSON.stringify(body)}}` : `"body":${body}}`)
  }
  return `${out}]`
}

/** A JSON value; a member left out (undefined) is null, as JSON.stringify of a whole row made it. */
const json = (v: unknown): string => JSON.stringify(v ?? null)

/**
 * One statement, so one round trip and its own transaction: lock the named heads (in the
 * same order as appendReceipts), keep the tenants whose head is where the caller chained
 * from, insert their rows and move their heads. Under read committed, a head locked after
 * another transaction moved it is read as it now stands, so it no longer matches and that
 * tenant is reported stale with nothing written.
 */
async function appendChained(
  sql: SqlHandle,
  batches: readonly ChainedReceipts[],
): Promise<{ stale: string[] }> {
  if (batches.length === 0) return { stale: [] }
  assertContiguous(batches)
  const receipts = batches.flatMap((b) => b.receipts)
  const bodies = batches.flatMap((b) => b.bodies)
  const heads = batches.map((b) => ({
    tenant_id: b.tenantId,
    from_seq: b.from.seq,
    from_hash: b.from.hash,
    to_seq: b.to.seq,
    to_hash: b.to.hash,
  }))
  const advanced = await sql<{ tenant_id: string }[]>`
    with expected as (
      select * from json_to_recordset(${JSON.stringify(heads)}::text::json)
        as e(tenant_id text, from_seq bigint, from_hash text, to_seq bigint, to_hash text)
    ), locked as (
      select h.tenant_id, h.seq, h.hash from audit_heads h
      where h.tenant_id in (select tenant_id from expected)
      order by h.tenant_id collate "C" for update
    ), ready as (
      select e.tenant_id, e.to_seq, e.to_hash from expected e
      join locked l on l.tenant_id = e.tenant_id and l.seq = e.from_seq and l.hash = e.from_hash
    ), inserted as (
      insert into receipts (tenant_id, seq, receipt_id, kind, decision, created_at, key_id, body, hash)
      select tenant_id, seq, receipt_id, kind, decision, created_at, key_id,
             coalesce(body_text, body::text), hash
      from json_to_recordset(${receiptRowsJson(receipts, bodies)}::text::json)
        as r(tenant_id text, seq bigint, receipt_id text, kind text, decision text,
             created_at bigint, key_id text, hash text, body json, body_text text)
      where r.tenant_id in (select tenant_id from ready)
    ), advanced as (
      update audit_heads h set seq = ready.to_seq, hash = ready.to_hash
      from ready where h.tenant_id = ready.tenant_id
      returning h.tenant_id
    )
    select tenant_id, pg_notify(${RECEIPTS_CHANNEL}, tenant_id) from advanced`
  const done = new Set(advanced.map((r) => r.tenant_id))
  return { stale: batches.map((b) => b.tenantId).filter((t) => !done.has(t)) }
}

/**
 * The statement moves a head to `to` on the caller's word: receipts that do not run from
 * `from` to `to` link by link would leave a gap or a fork no constraint catches.
 */
export function assertContiguous(batches: readonly ChainedReceipts[]): void {
  const tenants = new Set<string>()
  for (const b of batches) {
    if (tenants.has(b.tenantId)) throw new TypeError(`appendChained: tenant ${b.tenantId} twice`)
    tenants.add(b.tenantId)
    if (b.receipts.length === 0 || b.bodies.length !== b.receipts.length)
      throw new TypeError('appendChained: a batch needs receipts, each with its body')
    let at = b.from
    for (const r of b.receipts) {
      if (r.tenantId !== b.tenantId || r.seq !== at.seq + 1 || r.prevHash !== at.hash)
        throw new TypeError(`appendChained: receipt ${r.receiptId} does not follow seq ${at.seq}`)
      at = r
    }
    if (at.seq !== b.to.seq || at.hash !== b.to.hash)
      throw new TypeError('appendChained: `to` is not where the receipts end')
  }
}

export function createReceiptStore(sql: SqlHandle): ReceiptStore {
  return {
    append: (drafts) => appendReceipts(sql, drafts),
    appendChained: (batches) => appendChained(sql, batches),
    async get(tenantId, receiptId) {
      const [r] = await sql<ReceiptRow[]>`select body, hash from receipts
                                          where tenant_id = ${tenantId} and receipt_id = ${receiptId}`
      return r ? receiptFromRow(r) : null
    },
    async list(tenantId, afterSeq, limit) {
      const rows = await sql<ReceiptRow[]>`select body, hash from receipts
                                           where tenant_id = ${tenantId} and seq > ${afterSeq}
                                           order by seq limit ${limit}`
      return rows.map(receiptFromRow)
    },
    async checkCountsSince(sinceSeconds, tenantId) {
      const rows = await sql<{ tenant_id: string; key_id: string; n: number }[]>`
        select tenant_id, key_id, count(*)::int as n from receipts
        where kind = 'CHECK' and created_at >= ${sinceSeconds} and key_id is not null
          ${tenantId === undefined ? sql`` : sql`and tenant_id = ${tenantId}`}
        group by tenant_id, key_id`
      return rows.map((r) => ({ tenantId: r.tenant_id, keyId: r.key_id, count: r.n }))
    },
  }
}
