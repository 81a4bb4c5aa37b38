import type { ManifestStore } from '../../src/store/ports/manifests.js'
import type { FakeContext } from './fake-database.js'

/** Scanner manifests (store/postgres/manifest-store.ts) over the fake tables. */
export function createFakeManifestStore(ctx: FakeContext): ManifestStore {
  return {
    async add(tenantId, entries, importedAt) {
      let added = 0
      const rows = ctx.db.manifests.rows()
      for (const e of entries) {
        // The unique key (tenant_id, repo_id, commit_sha, scanner_version, created_at): on conflict do nothing.
        const same = (r: (typeof rows)[number]) =>
          r.tenantId === tenantId &&
          r.repoId === e.repoId &&
          r.commitSha === e.commitSha &&
          r.scannerVersion === e.scannerVersion &&
          r.createdAt === e.createdAt
        if (rows.some(same)) continue
        const row = { id: ctx.db.nextIdentity('manifests'), tenantId, ...e, importedAt }
        ctx.db.manifests.set(ctx.tx, row.id, row)
        rows.push(row)
        added++
      }
      return added
    },
    async latest(tenantId) {
      const latest = new Map<string, ReturnType<typeof ctx.db.manifests.rows>[number]>()
      for (const r of ctx.db.manifests.rows()) {
        if (r.tenantId !== tenantId) continue
        const held = latest.get(r.repoId)
        if (!held || r.createdAt > held.createdAt || (r.createdAt === held.createdAt && r.id > held.id))
          latest.set(r.repoId, r)
      }
      return [...latest.values()]
        .sort((a, b) => (a.repoId < b.repoId ? -1 : a.repoId > b.repoId ? 1 : 0))
        .map((r) => ({
          repoId: r.repoId,
          commitSha: r.commitSha,
          scannerVersion: r.scannerVersion,
          createdAt: r.createdAt,
        }))
    },
  }
}
