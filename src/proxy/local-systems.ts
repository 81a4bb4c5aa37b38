import type { SystemsFile } from '../config/systems.js'
import type { SystemRecord } from '../core/enrolled-system.js'
import { type CompiledSystem, compileSystem } from '../core/snapshot.js'
import { type LocalSystems, NO_LOCAL_SYSTEMS } from './request-plan.js'

/**
 * The systems of a proxy's deprecated route table file (`proxy.routesFile`), served beside its
 * tenant's enrolled ones for one release: those that name no tenant, or the proxy's. They are
 * not versioned decision state (a change needs a restart, and the control plane cannot approve
 * their STEP_UP writes unless they are also enrolled): `writegate systems apply -f <file>`
 * enrols them.
 */
export function localSystemsFrom(file: SystemsFile | null): (tenantId: string) => LocalSystems {
  if (!file || file.systems.length === 0) return () => NO_LOCAL_SYSTEMS
  const byTenant = new Map<string, LocalSystems>()
  return (tenantId) => {
    let local = byTenant.get(tenantId)
    if (local) return local
    const compiled: CompiledSystem[] = file.systems
      .filter((s) => s.tenantId === undefined || s.tenantId === tenantId)
      .map((s) => {
        const { tenantId: _, ...definition } = s
        const record: SystemRecord = { ...definition, tenantId, version: 0, createdAt: 0, updatedAt: 0 }
        return compileSystem(record)
      })
    const ids = new Map(compiled.map((s) => [s.record.systemId, s]))
    local = {
      byId: (id) => ids.get(id),
      onHost: (host) =>
        compiled.filter(
          (s) => new URL(s.record.upstream).hostname.replace(/^\[|\]$/g, '').toLowerCase() === host,
        ),
      all: () => compiled,
    }
    byTenant.set(tenantId, local)
    return local
  }
}
