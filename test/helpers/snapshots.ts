import type { TenantSnapshot } from '../../src/core/snapshot.js'

/** A tenant snapshot with no policy, verbs, principals, keys, roster entries or grants. */
export function emptySnapshot(tenantId: string, version: number, builtAt: number): TenantSnapshot {
  return {
    tenantId,
    version,
    builtAt,
    policies: { tenant: { policy: {}, version: 0, updatedAt: null }, environments: {}, principals: {} },
    verbs: [],
    principals: {},
    keys: {},
    roster: { all: false, principals: [], keys: [] },
    grants: [],
  }
}
