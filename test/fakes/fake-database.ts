import type { SignedCheckpoint } from '../../src/core/checkpoint.js'
import type { Principal } from '../../src/core/identity.js'
import type { PolicyMap, PolicyScope } from '../../src/core/policy-layers.js'
import type { CustomVerb, Environment } from '../../src/core/verbs.js'
import type { BadgeTokenRecord } from '../../src/store/ports/badge-tokens.js'
import type { Lease, PendingAction } from '../../src/store/ports/decision-state.js'
import type { NewApiKey } from '../../src/store/ports/identity.js'
import type { PortalSessionRecord } from '../../src/store/ports/portal-sessions.js'
import type { SystemDefinition } from '../../src/systems/system-definition.js'

/**
 * The in-memory tables behind the fake stores (Unleash's fake stores, for the service tests):
 * one per table of the migrations, rows in camelCase. The stores' contract suites run against
 * these fakes and the real adapters alike (test/contract), so they behave the same where the
 * services can tell.
 *
 * A transaction is an undo log: every change made through a transaction's stores records how to
 * put the row back, and a rollback replays that backwards. Rows are replaced whole, never
 * changed in place, and handed out as copies, so nothing outside a table holds a row it could
 * change behind the log's back. Each store call runs to completion without yielding once it has
 * its locks, which makes every conditional change (consume a lease, use a backup code) atomic.
 * The row locks the services depend on are taken as Postgres takes them (RowLocks): a tenant's
 * audit head and its row, and rows read for update. Other writes of concurrent transactions can
 * interleave between calls, and a read sees writes not yet committed; tests about that isolation,
 * and anything that reads or breaks the tables, run on the real adapters.
 */
export class Journal {
  #undo: (() => void)[] = []
  #onEnd: (() => void)[] = []

  record(undo: () => void): void {
    this.#undo.push(undo)
  }

  /** Runs when the transaction commits or rolls back (its locks are released). */
  onEnd(fn: () => void): void {
    this.#onEnd.push(fn)
  }

  commit(): void {
    this.#undo = []
    this.#end()
  }

  rollback(): void {
    for (let i = this.#undo.length - 1; i >= 0; i--) this.#undo[i]?.()
    this.#undo = []
    this.#end()
  }

  #end(): void {
    const fns = this.#onEnd
    this.#onEnd = []
    for (const fn of fns) fn()
  }
}

/**
 * Row locks held to the end of a transaction, as `select … for update` and UPDATE take them:
 * another transaction asking for the row waits until the holder commits or rolls back, and a
 * statement outside any transaction waits the same way without keeping the lock.
 */
export class RowLocks {
  readonly #held = new Map<string, { owner: Journal; waiting: (() => void)[] }>()
  /**
   * The row each waiting transaction waits for: the wait-for graph, in which Postgres finds
   * deadlocks. One row per transaction: the stores take their locks one after another.
   */
  readonly #waitsFor = new Map<Journal, string>()

  async acquire(owner: Journal | null, row: string): Promise<void> {
    for (;;) {
      const held = this.#held.get(row)
      if (!held || held.owner === owner) break
      // Two transactions each waiting for the other's row would wait for ever here; Postgres
      // fails one of them instead, and so does the fake (a test then fails at once, not at
      // tap's timeout). A statement outside a transaction holds nothing, so closes no cycle.
      if (owner && this.#leadsTo(held.owner, owner)) throw new DeadlockDetected(row)
      if (owner) this.#waitsFor.set(owner, row)
      try {
        await new Promise<void>((resolve) => held.waiting.push(resolve))
      } finally {
        if (owner) this.#waitsFor.delete(owner)
      }
    }
    if (owner && !this.#held.has(row)) {
      this.#held.set(row, { owner, waiting: [] })
      owner.onEnd(() => {
        const held = this.#held.get(row)
        this.#held.delete(row)
        for (const wake of held?.waiting ?? []) wake()
      })
    }
  }

  /** Whether `from` waits, through a chain of held rows, for `to`. */
  #leadsTo(from: Journal, to: Journal): boolean {
    const seen = new Set<Journal>()
    for (let j: Journal | undefined = from; j !== undefined && !seen.has(j); ) {
      if (j === to) return true
      seen.add(j)
      const row = this.#waitsFor.get(j)
      j = row === undefined ? undefined : this.#held.get(row)?.owner
    }
    return false
  }
}

/** Rows by primary key, in insertion order (as a heap table returns them without an ORDER BY). */
export class FakeTable<K, V extends object> {
  readonly #rows = new Map<K, V>()

  get(key: K): V | undefined {
    const row = this.#rows.get(key)
    return row === undefined ? undefined : structuredClone(row)
  }

  has(key: K): boolean {
    return this.#rows.has(key)
  }

  /** Copies of every row (filter them; the table is not a query engine). */
  rows(): V[] {
    return [...this.#rows.values()].map((r) => structuredClone(r))
  }

  /**
   * Inserts or replaces the row. A rollback puts the old row back only while the row is still the
   * one this write left: where Postgres would have made a second writer wait for the lock, the fake
   * let it go ahead, and undoing over its change would lose a committed write.
   */
  set(tx: Journal | null, key: K, row: V): void {
    const had = this.#rows.has(key)
    const before = this.#rows.get(key)
    const stored = structuredClone(row)
    this.#rows.set(key, stored)
    tx?.record(() => {
      if (this.#rows.get(key) !== stored) return
      if (had) this.#rows.set(key, before as V)
      else this.#rows.delete(key)
    })
  }

  delete(tx: Journal | null, key: K): boolean {
    if (!this.#rows.has(key)) return false
    const before = this.#rows.get(key) as V
    this.#rows.delete(key)
    tx?.record(() => {
      if (!this.#rows.has(key)) this.#rows.set(key, before)
    })
    return true
  }

  get size(): number {
    return this.#rows.size
  }
}

/** A composite key, for tables whose primary key has several columns. */
export function key(...parts: (string | number)[]): string {
  return JSON.stringify(parts)
}

/** A cycle of transactions waiting for each other's rows: one is failed, as Postgres fails it. */
export class DeadlockDetected extends Error {
  /** SQLSTATE deadlock_detected, as Postgres's error carries it. */
  readonly code = '40P01'

  constructor(row: string) {
    super(`fake database: deadlock detected waiting for ${row}`)
  }
}

/** What a Postgres unique violation would be: a bug in the caller, so it throws, with Postgres's code. */
export class ConstraintViolation extends Error {
  /** SQLSTATE unique_violation, as the real adapters' errors carry it. */
  readonly code = '23505'

  constructor(constraint: string) {
    super(`fake database: ${constraint} violated`)
  }
}

export interface TenantRow {
  id: string
  name: string
  createdAt: number
  sponsorHash: string
  version: number
  verbRegistryVersion: number
}
export interface TenantEmailRow {
  email: string
  tenantId: string
  createdAt: number
}
export interface PrincipalRow extends Principal {
  disabledAt: number | null
  enabledAt: number | null
  /** The identity column: creation order, for listing. */
  createdOrder: number
}
export interface ApiKeyRow extends NewApiKey {
  revokedAt: number | null
  revokeReason: string | null
}
export interface InviteRow {
  tenantId: string
  codeHash: string
  createdAt: number
  expiresAt: number
  issuerKeyId: string | null
}
export interface TotpRow {
  tenantId: string
  secretEnc: string
  createdAt: number
  lastUsedStep: number | null
  wrongCodes: number
  wrongCodesAt: number | null
}
export interface BackupCodeRow {
  tenantId: string
  index: number
  salt: string
  hash: string
  usedAt: number | null
}
export interface AuditHeadRow {
  tenantId: string
  seq: number
  hash: string
}
export interface ReceiptRow {
  tenantId: string
  seq: number
  receiptId: string
  kind: string
  decision: string | null
  createdAt: number
  keyId: string | null
  /** The exact JCS text that was hashed. */
  body: string
  hash: string
}
export interface PolicyLayerRow {
  tenantId: string
  scope: PolicyScope
  scopeKey: string
  policy: PolicyMap
  version: number
  updatedAt: number
}
export interface VerbRow extends CustomVerb {
  tenantId: string
  createdOrder: number
}
export interface GrantRow {
  id: string
  tenantId: string
  verb: string
  target: string | null
  principalId: string | null
  environment: Environment | null
  reason: string | null
  createdAt: number
  expiresAt: number
  consumedAt: number | null
  consumedBy: string | null
}
export interface RevocationRow {
  tenantId: string
  targetKind: 'all' | 'principal' | 'key'
  /** '' for `all`. */
  targetId: string
  reason: string | null
  revokedAt: number
  liftedAt: number | null
}
/** A lease, its id in the `id` column. */
export type LeaseRow = Omit<Lease, 'leaseId'> & { id: string }
export type PendingActionRow = PendingAction
export interface SandboxGrantRow {
  id: string
  verb: string
  target: string
  createdAt: number
  expiresAt: number
}
export type CheckpointRow = SignedCheckpoint
export type BadgeTokenRow = BadgeTokenRecord
export interface ManifestRow {
  id: number
  tenantId: string
  repoId: string
  commitSha: string
  scannerVersion: string
  createdAt: number
  importedAt: number
}
export interface SystemRow {
  tenantId: string
  systemId: string
  version: number
  /** As the jsonb column holds it: the id is the row's key, not in the definition. */
  definition: Omit<SystemDefinition, 'systemId'>
  createdAt: number
  updatedAt: number
  deletedAt: number | null
}
export type PortalSessionRow = PortalSessionRecord

/** Every table, keyed as its primary key is (composite keys through `key(...)`). */
export class FakeDatabase {
  readonly tenants = new FakeTable<string, TenantRow>()
  readonly tenantEmails = new FakeTable<string, TenantEmailRow>()
  readonly principals = new FakeTable<string, PrincipalRow>()
  readonly apiKeys = new FakeTable<string, ApiKeyRow>()
  /** By tenant id (one invite per tenant). */
  readonly invites = new FakeTable<string, InviteRow>()
  readonly totp = new FakeTable<string, TotpRow>()
  /** key(tenantId, index) */
  readonly backupCodes = new FakeTable<string, BackupCodeRow>()
  readonly auditHeads = new FakeTable<string, AuditHeadRow>()
  /** key(tenantId, seq) */
  readonly receipts = new FakeTable<string, ReceiptRow>()
  /** key(tenantId, scope, scopeKey) */
  readonly policyLayers = new FakeTable<string, PolicyLayerRow>()
  /** key(tenantId, name) */
  readonly verbs = new FakeTable<string, VerbRow>()
  readonly grants = new FakeTable<string, GrantRow>()
  /** key(tenantId, targetKind, targetId) */
  readonly revocations = new FakeTable<string, RevocationRow>()
  readonly leases = new FakeTable<string, LeaseRow>()
  /** By action id. */
  readonly pendingActions = new FakeTable<string, PendingActionRow>()
  readonly sandboxGrants = new FakeTable<string, SandboxGrantRow>()
  /** key(tenantId, seq) */
  readonly checkpoints = new FakeTable<string, CheckpointRow>()
  readonly badgeTokens = new FakeTable<string, BadgeTokenRow>()
  /** By identity. */
  readonly manifests = new FakeTable<number, ManifestRow>()
  /** key(tenantId, systemId) */
  readonly systems = new FakeTable<string, SystemRow>()
  /** By session hash. */
  readonly portalSessions = new FakeTable<string, PortalSessionRow>()

  readonly locks = new RowLocks()

  /** Identity columns (`generated always as identity`): one counter per table that has one. */
  readonly #identities = new Map<string, number>()

  nextIdentity(table: string): number {
    const next = (this.#identities.get(table) ?? 0) + 1
    this.#identities.set(table, next)
    return next
  }
}

/** What every fake store is built over: the tables, and the transaction it is bound to (or none). */
export interface FakeContext {
  db: FakeDatabase
  tx: Journal | null
}
