import t from 'tap'
import type { AuditLog } from '../../src/audit/audit-log.js'
import { persistDurable } from '../../src/audit/persist-durable.js'
import { draft, type Receipt, type ReceiptDraft } from '../../src/core/receipt.js'
import type { PendingAction } from '../../src/store/ports/decision-state.js'
import type { Stores, SystemOfRecord } from '../../src/store/ports/index.js'

/** Records which way a payload went: the group commit's append, or a transaction of its own. */
function fakes(stored: ReadonlySet<string> = new Set()) {
  const calls: string[] = []
  const asReceipts = (drafts: readonly ReceiptDraft[]) =>
    drafts.map((d, i) => ({ ...d, seq: i + 1, prevHash: 'p', hash: 'h' }) as Receipt)
  const stores = {
    grants: {
      async markConsumed(tenantId: string, grantId: string) {
        calls.push(`markConsumed ${tenantId} ${grantId}`)
      },
    },
    actions: {
      async insertIfAbsent(a: PendingAction) {
        calls.push(`insertIfAbsent ${a.actionId}`)
      },
    },
    receipts: {
      async get(_tenantId: string, receiptId: string) {
        return stored.has(receiptId) ? ({ receiptId } as Receipt) : null
      },
    },
  } as unknown as Stores
  const sor: SystemOfRecord = {
    stores,
    async transaction(fn) {
      calls.push('begin')
      const out = await fn(stores)
      calls.push('commit')
      return out
    },
  }
  const audit: AuditLog = {
    async append(drafts) {
      calls.push(`append ${drafts.length}`)
      return asReceipts(drafts)
    },
    async appendWith(_stores, drafts) {
      calls.push(`appendWith ${drafts.length}`)
      return asReceipts(drafts)
    },
    flush: async () => {},
  }
  return { calls, sor, audit }
}

const write = (detail: Record<string, unknown> = {}, decision: 'ALLOW' | 'DENY' = 'ALLOW') =>
  draft({
    receiptId: `rcp_${Math.random()}`,
    tenantId: 'ten_a',
    kind: 'CHECK',
    decision,
    createdAt: 1,
    detail,
  })

t.test('receipts alone go to the group commit, not a transaction of their own', async (t) => {
  const f = fakes()
  const out = await persistDurable(f.sor, f.audit, { receipts: [write(), write({}, 'DENY')], actions: [] })
  t.same(f.calls, ['append 2'])
  t.equal(out.length, 2)
})

t.test('a consumed grant is marked in the same transaction as its receipt', async (t) => {
  const f = fakes()
  await persistDurable(f.sor, f.audit, { receipts: [write(), write({ grantId: 'grt_1' })], actions: [] })
  t.same(f.calls, ['begin', 'appendWith 2', 'markConsumed ten_a grt_1', 'commit'])
})

t.test('a DENY naming a grant consumed none: receipts alone', async (t) => {
  const f = fakes()
  await persistDurable(f.sor, f.audit, { receipts: [write({ grantId: 'grt_1' }, 'DENY')], actions: [] })
  t.same(f.calls, ['append 1'])
})

t.test('a staged action becomes pending in the same transaction as its receipt', async (t) => {
  const f = fakes()
  const action = { actionId: 'act_1', tenantId: 'ten_a', stagedReceiptId: 'rcp_staged' } as PendingAction
  await persistDurable(f.sor, f.audit, { receipts: [write()], actions: [action] })
  t.same(f.calls, ['begin', 'appendWith 1', 'insertIfAbsent act_1', 'commit'])
})

t.test('a payload delivered again does not bring back its action (found in review)', async (t) => {
  // Its staging receipt is in the log: the action was stored with it, and may be resolved since.
  const f = fakes(new Set(['rcp_staged']))
  const action = { actionId: 'act_1', tenantId: 'ten_a', stagedReceiptId: 'rcp_staged' } as PendingAction
  await persistDurable(f.sor, f.audit, { receipts: [write()], actions: [action] })
  t.same(f.calls, ['begin', 'appendWith 1', 'commit'])
})
