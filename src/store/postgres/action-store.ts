import type { ActionStore, PendingAction } from '../ports/decision-state.js'
import type { SqlHandle } from './sql-handle.js'

interface ActionRow {
  id: string
  tenant_id: string
  system_id: string
  tool: string
  params: Record<string, unknown>
  verb: string
  target: string | null
  environment: string | null
  principal_id: string
  key_id: string
  staged_receipt_id: string
  created_at: number
  expires_at: number
  revert_of: string | null
  system_version: number | null
}

const toAction = (r: ActionRow): PendingAction => ({
  actionId: r.id,
  tenantId: r.tenant_id,
  systemId: r.system_id,
  tool: r.tool,
  params: r.params,
  verb: r.verb,
  target: r.target,
  environment: r.environment,
  principalId: r.principal_id,
  keyId: r.key_id,
  stagedReceiptId: r.staged_receipt_id,
  createdAt: Number(r.created_at),
  expiresAt: Number(r.expires_at),
  revertOf: r.revert_of,
  systemVersion: r.system_version === null ? null : Number(r.system_version),
})

export function createActionStore(sql: SqlHandle): ActionStore {
  return {
    async insert(a) {
      await sql`insert into pending_actions (id, tenant_id, system_id, tool, params, verb, target, environment,
                                             principal_id, key_id, staged_receipt_id, created_at, expires_at, revert_of, system_version)
                values (${a.actionId}, ${a.tenantId}, ${a.systemId}, ${a.tool}, ${sql.json(a.params as never)}, ${a.verb},
                        ${a.target}, ${a.environment}, ${a.principalId}, ${a.keyId}, ${a.stagedReceiptId},
                        ${a.createdAt}, ${a.expiresAt}, ${a.revertOf ?? null}, ${a.systemVersion ?? null})`
    },
    async insertIfAbsent(a) {
      await sql`insert into pending_actions (id, tenant_id, system_id, tool, params, verb, target, environment,
                                             principal_id, key_id, staged_receipt_id, created_at, expires_at, revert_of, system_version)
                values (${a.actionId}, ${a.tenantId}, ${a.systemId}, ${a.tool}, ${sql.json(a.params as never)}, ${a.verb},
                        ${a.target}, ${a.environment}, ${a.principalId}, ${a.keyId}, ${a.stagedReceiptId},
                        ${a.createdAt}, ${a.expiresAt}, ${a.revertOf ?? null}, ${a.systemVersion ?? null})
                on conflict (id) do nothing`
    },
    async get(tenantId, actionId) {
      const [r] = await sql<
        ActionRow[]
      >`select * from pending_actions where tenant_id = ${tenantId} and id = ${actionId}`
      return r ? toAction(r) : null
    },
    async list(tenantId, nowSeconds, limit, after) {
      const rows = after
        ? await sql<ActionRow[]>`select * from pending_actions
                                 where tenant_id = ${tenantId} and expires_at > ${nowSeconds}
                                   and (created_at, id) > (${after.createdAt}, ${after.actionId})
                                 order by created_at, id limit ${limit}`
        : await sql<ActionRow[]>`select * from pending_actions
                                 where tenant_id = ${tenantId} and expires_at > ${nowSeconds}
                                 order by created_at, id limit ${limit}`
      return rows.map(toAction)
    },
    async remove(tenantId, actionId) {
      const rows =
        await sql`delete from pending_actions where tenant_id = ${tenantId} and id = ${actionId} returning id`
      return rows.length === 1
    },
  }
}
