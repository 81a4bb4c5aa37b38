import type { EnrolledSystem } from '../config/systems.js'

/**
 * Whether a system is enrolled for the tenant the proxy acts as. A system that names a
 * tenant is that tenant's alone: its injected credential, policy, kill switch and audit
 * chain are that tenant's, so a proxy acting for another tenant must never forward to it.
 * A system that names no tenant (a sidecar's own route table) serves the proxy's tenant.
 */
export function enrolledFor(system: EnrolledSystem, tenantId: string): boolean {
  return system.tenantId === undefined || system.tenantId === tenantId
}
