import type { GrantCandidate } from '../../core/evaluate.js'
import type { ReceiptDraft } from '../../core/receipt.js'
import type { TenantSnapshot } from '../../core/snapshot.js'
import type { PendingAction } from './decision-state.js'

/** Monthly check counters per API key, shared by the API and every proxy (contract §1.3). */
export interface QuotaCounter {
  used(tenantId: string, keyId: string, period: string): Promise<number>
}

export interface QuotaCharge {
  keyId: string
  /** `YYYY-MM` (UTC). */
  period: string
  limit: number
}

export interface CommitRequest {
  tenantId: string
  /** The snapshot version the decision was made under. */
  version: number
  /** Count one check against this quota; null for paths that are not checks. */
  quota: QuotaCharge | null
  /** Grants that would turn a require_grant into ALLOW, best first; the first still unconsumed is consumed. */
  grantCandidates: readonly GrantCandidate[]
  /**
   * Proxy path only: what to make durable in the same atomic step, before the write may go
   * upstream. When a grant is consumed, `ifGranted[i]` (index-aligned with `grantCandidates`)
   * is made durable instead, so the receipt names the grant that was actually consumed.
   */
  durable?: { otherwise: DurablePayload; ifGranted?: readonly DurablePayload[] }
}

/** Receipts, and the pending actions a STEP_UP write staged (with the request they replay). */
export interface DurablePayload {
  receipts: ReceiptDraft[]
  actions: PendingAction[]
}

export type CommitResult =
  | { status: 'committed'; grantId: string | null; quotaUsed: number | null; durable: DurablePayload | null }
  /** The tenant moved on (or has no snapshot yet): refresh and decide again. */
  | { status: 'stale'; currentVersion: number | null }
  | { status: 'quota_exhausted'; used: number; limit: number }

/** Told the version a tenant's snapshot moved to. */
export type InvalidationListener = (version: number) => void

/**
 * Hot state for decisions: per-tenant snapshots keyed by version, the atomic commit
 * (version check, quota, grant consumption, and for proxies the receipt), and
 * invalidation on every version bump. Redis in production; memory for one process.
 */
export interface HotStore extends QuotaCounter {
  /**
   * Stores the snapshot unless a newer version is already there; then announces it. With
   * `over`, stores it exactly when the version held is `over`, newer or not: a hot store ahead
   * of the database (restored from a backup) is replaced, and a later publish is not.
   */
  publish(snapshot: TenantSnapshot, over?: number): Promise<'published' | 'older'>
  snapshot(tenantId: string): Promise<TenantSnapshot | null>
  version(tenantId: string): Promise<number | null>
  /**
   * Hears the tenant's version bumps, and only that tenant's: a proxy subscribes to its one
   * tenant, so a bump reaches that tenant's proxies, not every proxy (Redis: sharded pub/sub).
   */
  subscribe(tenantId: string, listener: InvalidationListener): () => void
  /** All-or-nothing: nothing is counted or consumed unless the result is `committed`. */
  commit(req: CommitRequest): Promise<CommitResult>
  /** Gives back a committed quota unit and grant when the API could not make its receipt durable. */
  release(tenantId: string, quota: QuotaCharge | null, grantId: string | null): Promise<void>
  /**
   * Forgets the tenant's snapshot and version, so every commit for it fails as stale until a
   * new snapshot is published: what a change that could not be published leaves behind.
   */
  invalidate(tenantId: string): Promise<void>
  /** Sets a counter only if the store has none (after a restart or a data loss). */
  seedQuota(tenantId: string, keyId: string, period: string, used: number): Promise<void>
  /** Lets a proxy find its tenant and key from its API key's hash, without Postgres. */
  indexKey(secretHash: string, ref: KeyRef): Promise<void>
  resolveKey(secretHash: string): Promise<KeyRef | null>
  /** Receipts committed by proxies, waiting to be drained into the audit log. */
  readonly receiptQueue: ReceiptQueue | null
  close(): Promise<void>
}

export interface KeyRef {
  tenantId: string
  keyId: string
}

export interface QueuedReceipts {
  /** Opaque id to acknowledge. */
  id: string
  tenantId: string
  /**
   * As queued, parsed but not validated (the drain checks it: audit/queued-payload.ts); null when
   * the entry holds no JSON payload at all.
   */
  payload: DurablePayload | null
}

/**
 * At-least-once hand-off from proxies to the audit log: entries stay until acknowledged
 * (after the Postgres commit), and entries a crashed drainer held are claimed again.
 */
export interface ReceiptQueue {
  /** Tenants that may have queued receipts (a hint; a periodic sweep covers lost hints). */
  dirtyTenants(): Promise<string[]>
  read(tenantId: string, consumer: string, count: number): Promise<QueuedReceipts[]>
  ack(tenantId: string, ids: string[]): Promise<void>
  /** Entries waiting across the given tenants. */
  backlog(tenantIds: string[]): Promise<number>
  /** Wakes a drainer when something was queued. */
  onQueued(listener: () => void): () => void
}
