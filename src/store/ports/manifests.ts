/** One scanned repository at one commit (interface.md "Manifest entry"). */
export interface ManifestEntry {
  repoId: string
  commitSha: string
  scannerVersion: string
  createdAt: number
}

export interface ManifestStore {
  /** Stores entries (an entry already stored is skipped); returns how many were new. */
  add(tenantId: string, entries: readonly ManifestEntry[], importedAt: number): Promise<number>
  /** The latest entry per repo (by createdAt, then import order), ordered by repoId. */
  latest(tenantId: string): Promise<ManifestEntry[]>
}
