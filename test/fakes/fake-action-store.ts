import type { ActionStore, PendingAction } from '../../src/store/ports/decision-state.js'
import type { FakeContext, PendingActionRow } from './fake-database.js'
import { jsonb, violation } from './fake-policy-store.js'

/**
 * Text order of the test databases' collation (C.UTF-8 on Postgres, C on PGlite): UTF-8 bytes,
 * which is code-point order. Action ids are base62, where it is plain ASCII order: digits, then
 * upper case, then lower case.
 */
const byText = (a: string, b: string): number => Buffer.compare(Buffer.from(a), Buffer.from(b))

const toAction = (r: PendingActionRow): PendingAction => ({
  actionId: r.actionId,
  tenantId: r.tenantId,
  systemId: r.systemId,
  tool: r.tool,
  params: r.params,
  verb: r.verb,
  target: r.target,
  environment: r.environment,
  principalId: r.principalId,
  keyId: r.keyId,
  stagedReceiptId: r.stagedReceiptId,
  createdAt: r.createdAt,
  expiresAt: r.expiresAt,
  revertOf: r.revertOf ?? null,
  systemVersion: r.systemVersion ?? null,
})

/** In-memory ActionStore (table pending_actions), mirroring src/store/postgres/action-store.ts. */
export function createFakeActionStore(ctx: FakeContext): ActionStore {
  const { db } = ctx

  /** The row as the insert binds it (a bad jsonb fails here, before any constraint). */
  const rowOf = (a: PendingAction): PendingActionRow => ({
    actionId: a.actionId,
    tenantId: a.tenantId,
    systemId: a.systemId,
    tool: a.tool,
    params: jsonb(a.params),
    verb: a.verb,
    target: a.target ?? null,
    environment: a.environment ?? null,
    principalId: a.principalId,
    keyId: a.keyId,
    stagedReceiptId: a.stagedReceiptId,
    createdAt: a.createdAt,
    expiresAt: a.expiresAt,
    revertOf: a.revertOf ?? null,
    systemVersion: a.systemVersion ?? null,
  })

  const insert = (row: PendingActionRow): void => {
    if (!db.tenants.has(row.tenantId)) throw violation('pending_actions_tenant_id_fkey', '23503')
    db.pendingActions.set(ctx.tx, row.actionId, row)
  }

  const find = (tenantId: string, id: string): PendingActionRow | undefined => {
    const r = db.pendingActions.get(id)
    return r && r.tenantId === tenantId ? r : undefined
  }

  return {
    async insert(a) {
      const row = rowOf(a)
      // The primary key is the id alone: an id is taken across tenants.
      if (db.pendingActions.has(row.actionId)) throw violation('pending_actions_pkey')
      insert(row)
    },
    async insertIfAbsent(a) {
      const row = rowOf(a)
      // `on conflict (id) do nothing`: any action with the id, of whichever tenant, wins.
      if (!db.pendingActions.has(row.actionId)) insert(row)
    },
    async get(tenantId, actionId) {
      const r = find(tenantId, actionId)
      return r ? toAction(r) : null
    },
    async list(tenantId, nowSeconds, limit, after) {
      // LIMIT's parameter is a bigint: Postgres refuses a fraction or NaN, and a negative.
      if (!Number.isInteger(limit)) {
        throw Object.assign(new Error(`invalid input syntax for type bigint: "${limit}"`), { code: '22P02' })
      }
      if (limit < 0) throw Object.assign(new Error('LIMIT must not be negative'), { code: '2201W' })
      // `(created_at, id) > ($createdAt, $actionId)` and `order by created_at, id`, one comparison.
      const order = (
        x: { createdAt: number; actionId: string },
        y: { createdAt: number; actionId: string },
      ) => x.createdAt - y.createdAt || byText(x.actionId, y.actionId)
      return db.pendingActions
        .rows()
        .filter((r) => r.tenantId === tenantId && r.expiresAt > nowSeconds && (!after || order(r, after) > 0))
        .sort(order)
        .slice(0, limit)
        .map(toAction)
    },
    async remove(tenantId, actionId) {
      if (!find(tenantId, actionId)) return false
      return db.pendingActions.delete(ctx.tx, actionId)
    },
  }
}
