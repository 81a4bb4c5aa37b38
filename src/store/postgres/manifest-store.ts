import type { ManifestEntry, ManifestStore } from '../ports/manifests.js'
import type { SqlHandle } from './sql-handle.js'

interface Row {
  repo_id: string
  commit_sha: string
  scanner_version: string
  created_at: number
}

export function createManifestStore(sql: SqlHandle): ManifestStore {
  return {
    async add(tenantId, entries, importedAt) {
      if (entries.length === 0) return 0
      const rows = entries.map((e) => ({
        tenant_id: tenantId,
        repo_id: e.repoId,
        commit_sha: e.commitSha,
        scanner_version: e.scannerVersion,
        created_at: e.createdAt,
        imported_at: importedAt,
      }))
      const inserted = await sql`
        insert into manifests ${sql(rows, 'tenant_id', 'repo_id', 'commit_sha', 'scanner_version', 'created_at', 'imported_at')}
        on conflict do nothing returning id`
      return inserted.length
    },
    async latest(tenantId) {
      const rows = await sql<Row[]>`
        select distinct on (repo_id) repo_id, commit_sha, scanner_version, created_at from manifests
        where tenant_id = ${tenantId}
        order by repo_id, created_at desc, id desc`
      return rows.map(
        (r): ManifestEntry => ({
          repoId: r.repo_id,
          commitSha: r.commit_sha,
          scannerVersion: r.scanner_version,
          createdAt: Number(r.created_at),
        }),
      )
    },
  }
}
