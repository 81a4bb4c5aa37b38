import type { SystemsFile } from '../../src/config/systems.js'
import type { SystemRecord } from '../../src/core/enrolled-system.js'
import { CompiledSnapshot, type TenantSnapshot } from '../../src/core/snapshot.js'
import { createSnapshotCache } from '../../src/gate/snapshot-cache.js'
import { createMemoryHotStore } from '../../src/store/memory/hot-store.js'
import { createSystemsRegistry, type SystemsRegistry } from '../../src/systems/systems-registry.js'

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
    systems: [],
  }
}

/** A systems file's systems as one tenant's enrolled records (version 1). */
export function recordsOf(file: SystemsFile, tenantId: string): SystemRecord[] {
  return file.systems
    .filter((s) => s.tenantId === undefined || s.tenantId === tenantId)
    .map(({ tenantId: _, ...d }) => ({ ...d, tenantId, version: 1, createdAt: 0, updatedAt: 0 }))
}

/** A compiled snapshot of one tenant enrolling these systems (and nothing else). */
export function snapshotWithSystems(tenantId: string, systems: SystemRecord[]): CompiledSnapshot {
  return new CompiledSnapshot({ ...emptySnapshot(tenantId, 1, 0), systems })
}

/** The control plane's systems registry over an in-memory snapshot enrolling the file's systems. */
export async function registryOver(file: SystemsFile, tenantId: string): Promise<SystemsRegistry> {
  const hot = createMemoryHotStore()
  await hot.publish({ ...emptySnapshot(tenantId, 1, 0), systems: recordsOf(file, tenantId) })
  return createSystemsRegistry({ snapshots: createSnapshotCache({ hot, nowMs: () => 0 }) })
}
