import type { PolicyLayer, PolicyMap, PolicyScope } from '../../core/policy-layers.js'
import type { TenantSnapshot } from '../../core/snapshot.js'
import type { CustomVerb } from '../../core/verbs.js'

export interface StoredLayer extends PolicyLayer {
  scope: PolicyScope
  /** '' for the tenant default, the environment name, or the principal id. */
  scopeKey: string
}

export interface PolicyStore {
  get(tenantId: string, scope: PolicyScope, scopeKey: string): Promise<StoredLayer | null>
  /** Every configured layer of the tenant. */
  list(tenantId: string): Promise<StoredLayer[]>
  /** Locks the layer's row (if any) for the rest of the transaction. */
  getForUpdate(tenantId: string, scope: PolicyScope, scopeKey: string): Promise<StoredLayer | null>
  /** Writes the layer's policy and advances its version by one. */
  write(
    tenantId: string,
    scope: PolicyScope,
    scopeKey: string,
    policy: PolicyMap,
    at: number,
  ): Promise<StoredLayer>
}

export interface VerbStore {
  list(tenantId: string): Promise<CustomVerb[]>
  get(tenantId: string, name: string): Promise<CustomVerb | null>
  count(tenantId: string): Promise<number>
  insert(tenantId: string, verb: CustomVerb): Promise<void>
  setDescription(tenantId: string, name: string, description: string): Promise<void>
  /** Marks `name` deprecated as an alias of `aliasOf`, and re-points older aliases of it there too. */
  deprecate(tenantId: string, name: string, aliasOf: string, at: number): Promise<void>
  registryVersion(tenantId: string): Promise<number>
  /** Optimistic concurrency: advances the registry version only if it is still `expected`. */
  advanceRegistry(tenantId: string, expected: number): Promise<boolean>
}

export interface GrantRecord {
  grantId: string
  tenantId: string
  verb: string
  target: string | null
  principalId: string | null
  environment: string | null
  reason: string | null
  createdAt: number
  expiresAt: number
}

export interface GrantStore {
  insert(g: GrantRecord): Promise<void>
  /** Records consumption (decided in the hot store); idempotent. */
  markConsumed(tenantId: string, grantId: string, at: number, receiptId: string): Promise<void>
  /**
   * Undoes markConsumed by `receiptId` (and by nothing else): the grant is live again, for a
   * write it allowed that provably never reached the upstream.
   */
  unmarkConsumed(tenantId: string, grantId: string, receiptId: string): Promise<void>
  /** Moves unconsumed grants of a renamed verb to its new name. */
  renameVerb(tenantId: string, from: string, to: string): Promise<number>
}

export type RosterTarget = { kind: 'all' } | { kind: 'principal'; id: string } | { kind: 'key'; id: string }

export interface RosterEntry {
  target: RosterTarget
  reason: string | null
  revokedAt: number
}

export interface RosterStore {
  /** False when the target is already on the roster (the first reason is kept). */
  add(tenantId: string, target: RosterTarget, reason: string | null, at: number): Promise<boolean>
  /**
   * Lifts the target's revocation at `at`; false when it was not on the roster. The entry is
   * kept, lifted, so credentials outstanding at the revocation stay revoked.
   */
  remove(tenantId: string, target: RosterTarget, at: number): Promise<boolean>
  list(tenantId: string): Promise<RosterEntry[]>
}

export interface Lease {
  leaseId: string
  tenantId: string
  keyId: string
  principalId: string
  verb: string
  target: string | null
  systemId: string
  binding: string
  createdAt: number
  expiresAt: number
  usedAt: number | null
}

export interface LeaseStore {
  insert(l: Omit<Lease, 'usedAt'>): Promise<void>
  /** Inserts unless a lease with the id exists (ALLOW-token leases are created on first use). */
  insertIfAbsent(l: Omit<Lease, 'usedAt'>): Promise<void>
  get(tenantId: string, leaseId: string): Promise<Lease | null>
  /** Marks the lease used if it was unused; returns false if it was used already. Single use under concurrency. */
  consume(tenantId: string, leaseId: string, at: number): Promise<boolean>
}

export interface PendingAction {
  actionId: string
  tenantId: string
  systemId: string
  tool: string
  params: Record<string, unknown>
  verb: string
  target: string | null
  environment: string | null
  principalId: string
  keyId: string
  stagedReceiptId: string
  createdAt: number
  expiresAt: number
  /** The action whose write this one undoes (staged by its approval); null or absent otherwise. */
  revertOf?: string | null
  /**
   * The version of its system the action was staged under; null or absent when it had none (a
   * proxy's routes file) or was staged before versions were kept.
   */
  systemVersion?: number | null
}

/** Where a page of pending actions resumes: strictly after this (createdAt, actionId). */
export interface ActionPosition {
  createdAt: number
  actionId: string
}

export interface ActionStore {
  insert(a: PendingAction): Promise<void>
  /** For redelivered proxy payloads: a second insert of one action changes nothing. */
  insertIfAbsent(a: PendingAction): Promise<void>
  get(tenantId: string, actionId: string): Promise<PendingAction | null>
  /**
   * Pending, unexpired actions of the tenant, oldest first (by createdAt, then actionId), at
   * most `limit`, strictly after `after` when given.
   */
  list(tenantId: string, nowSeconds: number, limit: number, after?: ActionPosition): Promise<PendingAction[]>
  /** Deletes the action; false if it was already gone (approved concurrently). */
  remove(tenantId: string, actionId: string): Promise<boolean>
}

export interface SandboxGrantStore {
  insert(g: {
    grantId: string
    verb: string
    target: string
    createdAt: number
    expiresAt: number
  }): Promise<void>
  pruneExpired(nowSeconds: number): Promise<number>
}

/** Reads everything a decision depends on, consistently, at the tenant's current version. */
export interface SnapshotSource {
  read(tenantId: string, nowSeconds: number): Promise<TenantSnapshot | null>
  /** Every tenant id with its current version, for reconciliation. */
  versions(): Promise<{ tenantId: string; version: number }[]>
}
