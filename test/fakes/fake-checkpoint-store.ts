import type { SignedCheckpoint } from '../../src/core/checkpoint.js'
import type { CheckpointStore } from '../../src/store/ports/checkpoints.js'
import { type CheckpointRow, type FakeContext, key } from './fake-database.js'

const toCheckpoint = (r: CheckpointRow): SignedCheckpoint => ({ ...r })

/** Signed checkpoints (store/postgres/checkpoint-store.ts) over the fake tables. */
export function createFakeCheckpointStore(ctx: FakeContext): CheckpointStore {
  const ofTenant = (tenantId: string) =>
    ctx.db.checkpoints
      .rows()
      .filter((c) => c.tenantId === tenantId)
      .sort((a, b) => a.seq - b.seq)
  return {
    async unanchoredHeads(afterTenantId, limit) {
      return ctx.db.auditHeads
        .rows()
        .filter(
          (h) => h.seq > 0 && h.tenantId > afterTenantId && !ctx.db.checkpoints.has(key(h.tenantId, h.seq)),
        )
        .sort((a, b) => (a.tenantId < b.tenantId ? -1 : a.tenantId > b.tenantId ? 1 : 0))
        .slice(0, limit)
        .map((h) => ({ tenantId: h.tenantId, seq: h.seq, hash: h.hash }))
    },
    async save(checkpoints) {
      // on conflict (tenant_id, seq) do nothing: the first stored wins.
      for (const c of checkpoints) {
        const k = key(c.tenantId, c.seq)
        if (!ctx.db.checkpoints.has(k)) ctx.db.checkpoints.set(ctx.tx, k, { ...c })
      }
    },
    async at(tenantId, seq) {
      const c = ctx.db.checkpoints.get(key(tenantId, seq))
      return c ? toCheckpoint(c) : null
    },
    async latest(tenantId) {
      const c = ofTenant(tenantId).at(-1)
      return c ? toCheckpoint(c) : null
    },
    async range(tenantId, afterSeq, toSeq, limit) {
      return ofTenant(tenantId)
        .filter((c) => c.seq > afterSeq && c.seq <= toSeq)
        .slice(0, limit)
        .map(toCheckpoint)
    },
  }
}
