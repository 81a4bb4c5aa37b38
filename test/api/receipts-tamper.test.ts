import fc from 'fast-check'
import t from 'tap'
import type { StoredReceiptRow } from '../../src/core/chain-verifier.js'
import { signCheckpoint } from '../../src/core/checkpoint.js'
import { newApiKey } from '../../src/core/credentials.js'
import { publicKeyId } from '../../src/core/ed25519.js'
import { newId } from '../../src/core/ids.js'
import { chainReceipts, type ReceiptDraft } from '../../src/core/receipt.js'
import { hashSecret } from '../../src/core/secret-hash.js'
import { createSystemOfRecord } from '../../src/store/postgres/system-of-record.js'
import { draftArb, ed25519 } from '../helpers/audit-logs.js'
import { API_BACKENDS } from '../helpers/backends.js'
import { startControlPlane } from '../helpers/control-plane.js'

/**
 * Tampering with the stored log, row by row in the database, as someone with write access
 * to Postgres but not the checkpoint signing key could. GET /v1/receipts/verify must
 * report every such change and accept every untouched log.
 */
type Mutation =
  | { kind: 'edit-body'; row: number; at: number; char: string }
  | { kind: 'edit-hash'; row: number; at: number }
  | { kind: 'edit-column'; row: number; column: 'decision' | 'kind' | 'created_at' | 'receipt_id' }
  | { kind: 'delete'; row: number }
  | { kind: 'swap'; i: number; j: number }
  | { kind: 'insert'; at: number }
  | { kind: 'truncate'; keep: number; fixHead: boolean }
  | { kind: 'resign'; sameKeyId: boolean }
  | { kind: 'rewrite'; row: number }

const unit = fc.integer({ min: 0, max: 999_999 }).map((n) => n / 1_000_000)
const mutationArb: fc.Arbitrary<Mutation> = fc.oneof(
  fc.record({
    kind: fc.constant('edit-body' as const),
    row: unit,
    at: unit,
    char: fc.constantFrom('a', 'Z', '7', ' ', '-'),
  }),
  fc.record({ kind: fc.constant('edit-hash' as const), row: unit, at: unit }),
  fc.record({
    kind: fc.constant('edit-column' as const),
    row: unit,
    column: fc.constantFrom(
      'decision' as const,
      'kind' as const,
      'created_at' as const,
      'receipt_id' as const,
    ),
  }),
  fc.record({ kind: fc.constant('delete' as const), row: unit }),
  fc.record({ kind: fc.constant('swap' as const), i: unit, j: unit }),
  fc.record({ kind: fc.constant('insert' as const), at: unit }),
  fc.record({ kind: fc.constant('truncate' as const), keep: unit, fixHead: fc.boolean() }),
  fc.record({ kind: fc.constant('resign' as const), sameKeyId: fc.boolean() }),
  fc.record({ kind: fc.constant('rewrite' as const), row: unit }),
)
const pick = (u: number, n: number) => Math.min(n - 1, Math.floor(u * n))
const intruder = ed25519()

for (const kind of API_BACKENDS) {
  t.test(`verify endpoint detects tampering in the database: ${kind}`, async (t) => {
    const { api, cp } = await startControlPlane(t, kind)
    const sql = cp.database!.sql
    const { log, services } = cp.auditTrail

    /** A fresh tenant with a log, a signed checkpoint, and sometimes receipts after it. */
    const stores = createSystemOfRecord(cp.database!).stores
    /** A tenant and an admin key written straight to the store: much cheaper than issuance (TOTP, backup codes). */
    async function quickTenant() {
      const tenantId = newId('tenant')
      const principalId = newId('principal')
      const apiKey = newApiKey()
      await stores.tenants.create({
        id: tenantId,
        name: 'T',
        createdAt: 1,
        sponsorHash: hashSecret(newApiKey()),
      })
      await stores.principals.create({ id: principalId, tenantId, name: 'p', disabled: false, createdAt: 1 })
      await stores.keys.create({
        id: newId('key'),
        tenantId,
        principalId,
        secretHash: hashSecret(apiKey),
        scope: 'admin',
        email: 'e@example.com',
        createdAt: 1,
      })
      return { tenantId, apiKey }
    }

    async function seed(drafts: (tid: string) => ReceiptDraft[], tail: (tid: string) => ReceiptDraft[]) {
      const tenant = await quickTenant()
      await log.append(drafts(tenant.tenantId))
      const checkpoint = await services.checkpointer.checkpointTenant(tenant.tenantId)
      const extra = tail(tenant.tenantId)
      if (extra.length > 0) await log.append(extra)
      const rows = await services.reader.rows(tenant.tenantId, 0, Number.MAX_SAFE_INTEGER, 1000)
      return { tenant, checkpoint: checkpoint!, rows }
    }

    const verify = async (apiKey: string) => (await api.get('/v1/receipts/verify', { bearer: apiKey })).body

    async function setRow(tid: string, seq: number, row: Partial<StoredReceiptRow>) {
      if (row.body !== undefined)
        await sql`update receipts set body = ${row.body} where tenant_id = ${tid} and seq = ${seq}`
      if (row.hash !== undefined)
        await sql`update receipts set hash = ${row.hash} where tenant_id = ${tid} and seq = ${seq}`
    }

    /** Applies the mutation; returns false when it would change nothing. */
    async function mutate(
      tid: string,
      rows: StoredReceiptRow[],
      checkpointSeq: number,
      m: Mutation,
    ): Promise<boolean> {
      const n = rows.length
      const head = rows.at(-1)!
      switch (m.kind) {
        case 'edit-body': {
          const r = rows[pick(m.row, n)]!
          const at = pick(m.at, r.body.length)
          const c = r.body[at] === m.char ? '!' : m.char
          await setRow(tid, r.seq, { body: r.body.slice(0, at) + c + r.body.slice(at + 1) })
          return true
        }
        case 'edit-hash': {
          const r = rows[pick(m.row, n)]!
          const at = pick(m.at, 64)
          const c = r.hash[at] === '0' ? '1' : '0'
          await setRow(tid, r.seq, { hash: r.hash.slice(0, at) + c + r.hash.slice(at + 1) })
          return true
        }
        case 'edit-column': {
          const r = rows[pick(m.row, n)]!
          if (m.column === 'decision')
            await sql`update receipts set decision = ${r.decision === 'ALLOW' ? 'DENY' : 'ALLOW'} where tenant_id = ${tid} and seq = ${r.seq}`
          if (m.column === 'kind')
            await sql`update receipts set kind = ${r.kind === 'CHECK' ? 'GRANT' : 'CHECK'} where tenant_id = ${tid} and seq = ${r.seq}`
          if (m.column === 'created_at')
            await sql`update receipts set created_at = created_at + 1 where tenant_id = ${tid} and seq = ${r.seq}`
          if (m.column === 'receipt_id')
            await sql`update receipts set receipt_id = receipt_id || 'x' where tenant_id = ${tid} and seq = ${r.seq}`
          return true
        }
        case 'delete':
          await sql`delete from receipts where tenant_id = ${tid} and seq = ${rows[pick(m.row, n)]!.seq}`
          return true
        case 'swap': {
          if (n < 2) return false
          const i = rows[pick(m.i, n)]!
          const jRow = rows[pick(m.j, n)]!
          const j = jRow.seq === i.seq ? rows[(pick(m.i, n) + 1) % n]! : jRow
          // Move everything but seq between the two rows (receipt_id via a temporary value: it is unique).
          await sql`update receipts set receipt_id = 'tmp' where tenant_id = ${tid} and seq = ${j.seq}`
          for (const [to, from] of [
            [i, j],
            [j, i],
          ] as const) {
            await sql`update receipts set body = ${from.body}, hash = ${from.hash}, kind = ${from.kind},
                      decision = ${from.decision}, created_at = ${from.createdAt}, receipt_id = ${`${from.receiptId}~`}
                      where tenant_id = ${tid} and seq = ${to.seq}`
          }
          await sql`update receipts set receipt_id = left(receipt_id, -1) where tenant_id = ${tid} and seq in (${i.seq}, ${j.seq})`
          return true
        }
        case 'insert': {
          // A forged receipt that links to its predecessor; later rows are renumbered and the head moved.
          const at = pick(m.at, n) + 1
          const prev = rows[at - 2]
          const start = prev ? { seq: prev.seq, hash: prev.hash } : { seq: 0, hash: '0'.repeat(64) }
          const base = JSON.parse(rows[at - 1]!.body)
          const { seq: _s, prevHash: _p, ...d } = base
          const chained = chainReceipts(start, [{ ...d, receiptId: `rcp_forged${tid}`, reason: 'forged' }])
          const forged = chained.receipts[0]!
          await sql`update receipts set seq = -(seq + 1) where tenant_id = ${tid} and seq >= ${at}`
          await sql`update receipts set seq = -seq where tenant_id = ${tid} and seq < 0`
          await sql`insert into receipts (tenant_id, seq, receipt_id, kind, decision, created_at, body, hash)
                    values (${tid}, ${at}, ${forged.receiptId}, ${forged.kind}, ${forged.decision}, ${forged.createdAt},
                            ${chained.bodies[0]!}, ${forged.hash})`
          await sql`update audit_heads set seq = seq + 1 where tenant_id = ${tid}`
          return true
        }
        case 'truncate': {
          if (m.fixHead) {
            // A careful attacker also rewinds the head row: only the signed checkpoint can tell.
            if (checkpointSeq < 2) return false
            const keep = rows[pick(m.keep, checkpointSeq - 1)]!
            await sql`delete from receipts where tenant_id = ${tid} and seq > ${keep.seq}`
            await sql`update audit_heads set seq = ${keep.seq}, hash = ${keep.hash} where tenant_id = ${tid}`
          } else {
            const keep = rows[pick(m.keep, n - 1)]
            await sql`delete from receipts where tenant_id = ${tid} and seq > ${keep?.seq ?? 0}`
          }
          return true
        }
        case 'resign': {
          const [cp0] = await sql<{ seq: number; hash: string; at: number }[]>`
            select seq, hash, at from audit_checkpoints where tenant_id = ${tid} order by seq desc limit 1`
          const forged = signCheckpoint(intruder.privateKey, {
            tenantId: tid,
            seq: cp0!.seq,
            hash: cp0!.hash,
            at: cp0!.at,
          })
          const keyId = m.sameKeyId ? publicKeyId(services.signingKey) : forged.keyId
          await sql`update audit_checkpoints set signature = ${forged.signature}, key_id = ${keyId}
                    where tenant_id = ${tid} and seq = ${cp0!.seq}`
          return true
        }
        case 'rewrite': {
          // Change an anchored receipt and re-hash everything after it, head included.
          const i = pick(m.row, checkpointSeq)
          const prev = rows[i - 1]
          const start = prev ? { seq: prev.seq, hash: prev.hash } : { seq: 0, hash: '0'.repeat(64) }
          const drafts = rows.slice(i).map((r) => {
            const { seq: _s, prevHash: _p, ...d } = JSON.parse(r.body)
            return d as ReceiptDraft
          })
          drafts[0] = { ...drafts[0]!, reason: `${drafts[0]!.reason ?? ''}rewritten` }
          const chained = chainReceipts(start, drafts)
          for (const [k, r] of chained.receipts.entries()) {
            await setRow(tid, r.seq, { body: chained.bodies[k]!, hash: r.hash })
          }
          await sql`update audit_heads set hash = ${chained.head.hash} where tenant_id = ${tid}`
          return head.seq > 0
        }
      }
    }

    t.test('every untouched log verifies', async (t) => {
      await fc.assert(
        fc.asyncProperty(
          fc.array(draftArb('x'), { minLength: 1, maxLength: 8 }),
          fc.array(draftArb('x'), { maxLength: 3 }),
          async (drafts, tail) => {
            const { tenant } = await seed(
              (tid) => drafts.map((d) => ({ ...d, tenantId: tid })),
              (tid) => tail.map((d) => ({ ...d, tenantId: tid })),
            )
            const v = await verify(tenant.apiKey)
            t.equal(v.valid, true, v.message ?? 'valid')
            t.equal(v.checked, v.headSeq)
          },
        ),
        { numRuns: 25 },
      )
    })

    t.test('every mutation is detected', async (t) => {
      const reasons = new Map<string, number>()
      await fc.assert(
        fc.asyncProperty(
          fc.array(draftArb('x'), { minLength: 1, maxLength: 8 }),
          fc.array(draftArb('x'), { maxLength: 3 }),
          mutationArb,
          async (drafts, tail, m) => {
            const { tenant, checkpoint, rows } = await seed(
              (tid) => drafts.map((d) => ({ ...d, tenantId: tid })),
              (tid) => tail.map((d) => ({ ...d, tenantId: tid })),
            )
            if (!(await mutate(tenant.tenantId, rows, checkpoint.seq, m))) return
            const v = await verify(tenant.apiKey)
            reasons.set(`${m.kind}:${v.reason}`, (reasons.get(`${m.kind}:${v.reason}`) ?? 0) + 1)
            if (v.valid !== false) t.fail(`undetected ${JSON.stringify(m)}`)
            else t.ok(Number.isInteger(v.firstInvalidSeq) && typeof v.reason === 'string', v.reason)
            if (m.kind === 'truncate' && m.fixHead) {
              // A log cut short, its head rewound: a monitor verifying only what is new since it
              // last looked (from the original head's successor, or the current one's) learns of
              // the cut too (found in review).
              for (const from of [(rows.at(-1)?.seq ?? 0) + 1, v.headSeq + 1]) {
                const since = (await api.get(`/v1/receipts/verify?from=${from}`, { bearer: tenant.apiKey }))
                  .body
                if (since.valid !== false) t.fail(`undetected from ${from}: ${JSON.stringify(m)}`)
                else t.equal(since.reason, 'truncated', `from ${from}: ${since.message}`)
              }
            }
          },
        ),
        { numRuns: 120 },
      )
      t.comment(`mutation:reason counts ${JSON.stringify([...reasons])}`)
    })
  })
}
