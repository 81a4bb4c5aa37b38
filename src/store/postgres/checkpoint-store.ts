import type { SignedCheckpoint } from '../../core/checkpoint.js'
import type { CheckpointStore } from '../ports/checkpoints.js'
import type { SqlHandle } from './sql-handle.js'

interface Row {
  tenant_id: string
  seq: number
  hash: string
  at: number
  signature: string
  key_id: string
}

function fromRow(r: Row): SignedCheckpoint {
  return {
    tenantId: r.tenant_id,
    seq: Number(r.seq),
    hash: r.hash,
    at: Number(r.at),
    signature: r.signature,
    keyId: r.key_id,
  }
}

export function createCheckpointStore(sql: SqlHandle): CheckpointStore {
  return {
    async unanchoredHeads(afterTenantId, limit) {
      const rows = await sql<{ tenant_id: string; seq: number; hash: string }[]>`
        select h.tenant_id, h.seq, h.hash from audit_heads h
        where h.seq > 0 and h.tenant_id > ${afterTenantId}
          and not exists (select 1 from audit_checkpoints c where c.tenant_id = h.tenant_id and c.seq = h.seq)
        order by h.tenant_id limit ${limit}`
      return rows.map((r) => ({ tenantId: r.tenant_id, seq: Number(r.seq), hash: r.hash }))
    },
    async save(checkpoints) {
      if (checkpoints.length === 0) return
      const rows = checkpoints.map((c) => ({
        tenant_id: c.tenantId,
        seq: c.seq,
        hash: c.hash,
        at: c.at,
        signature: c.signature,
        key_id: c.keyId,
      }))
      await sql`insert into audit_checkpoints ${sql(rows, 'tenant_id', 'seq', 'hash', 'at', 'signature', 'key_id')}
                on conflict (tenant_id, seq) do nothing`
    },
    async at(tenantId, seq) {
      const [r] = await sql<
        Row[]
      >`select * from audit_checkpoints where tenant_id = ${tenantId} and seq = ${seq}`
      return r ? fromRow(r) : null
    },
    async latest(tenantId) {
      const [r] = await sql<Row[]>`select * from audit_checkpoints where tenant_id = ${tenantId}
                                   order by seq desc limit 1`
      return r ? fromRow(r) : null
    },
    async range(tenantId, afterSeq, toSeq, limit) {
      const rows = await sql<Row[]>`select * from audit_checkpoints
                                    where tenant_id = ${tenantId} and seq > ${afterSeq} and seq <= ${toSeq}
                                    order by seq limit ${limit}`
      return rows.map(fromRow)
    },
  }
}
