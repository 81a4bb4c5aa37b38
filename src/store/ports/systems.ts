import type { SystemDefinition, SystemRecord } from '../../systems/system-definition.js'

/** A system as stored: live, or a tombstone that keeps its id taken. */
export interface StoredSystem extends SystemRecord {
  deletedAt: number | null
}

/** Enrolled systems, per tenant. Writers hold the tenant row lock (the version bump). */
export interface SystemStore {
  /** Live systems of the tenant, by id. */
  list(tenantId: string): Promise<SystemRecord[]>
  /** Live or tombstoned; null when the id was never used in the tenant. */
  get(tenantId: string, systemId: string): Promise<StoredSystem | null>
  /** Live systems of the tenant. */
  count(tenantId: string): Promise<number>
  /** Inserts version 1; false when the id is taken (live or tombstoned). */
  insert(
    tenantId: string,
    systemId: string,
    definition: SystemDefinition,
    at: number,
  ): Promise<SystemRecord | null>
  /** Replaces the definition of a live system and advances its version by one; null when not live. */
  replace(
    tenantId: string,
    systemId: string,
    definition: SystemDefinition,
    at: number,
  ): Promise<SystemRecord | null>
  /** Tombstones a live system; false when it was not live. */
  remove(tenantId: string, systemId: string, at: number): Promise<boolean>
}
