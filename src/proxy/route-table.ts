import type { Agent as HttpAgent } from 'node:http'
import { type EnrolledSystem, readCredential, type SystemsFile } from '../config/systems.js'
import { compileRoutes, type RouteMatch, type RouteMatcher } from '../systems/route-matcher.js'
import { enrolledFor } from './system-tenancy.js'
import { createUpstreamAgent } from './upstream-agent.js'

export interface ProxySystem {
  readonly system: EnrolledSystem
  readonly origin: URL
  /** The header and value writegate injects; null when the system takes none. */
  readonly credential: { header: string; value: string } | null
  /** Keep-alive connections to the one upstream origin, cut after `upstreamTimeoutMs` of silence. */
  readonly agent: HttpAgent
  /** The same matcher /v1/check uses, so both map a request to one verb. */
  readonly routes: RouteMatcher
}

export type { RouteMatch }

const READS = new Set(['GET', 'HEAD', 'OPTIONS'])

export function isRead(method: string): boolean {
  return READS.has(method)
}

/** The proxy's compiled route table: enrolled systems, their fixed origins and routes. */
export class RouteTable {
  private readonly byId = new Map<string, ProxySystem>()
  private readonly byHost = new Map<string, ProxySystem[]>()
  readonly passthrough: ReadonlySet<string>

  constructor(file: SystemsFile, env: NodeJS.ProcessEnv, opts: { upstreamTimeoutMs: number }) {
    for (const system of file.systems) {
      const origin = new URL(system.upstream)
      const entry: ProxySystem = {
        system,
        origin,
        credential: system.credential
          ? { header: system.credential.header.toLowerCase(), value: readCredential(system.credential, env) }
          : null,
        agent: createUpstreamAgent(origin, opts.upstreamTimeoutMs),
        routes: compileRoutes(system.routes),
      }
      this.byId.set(system.systemId, entry)
      const list = this.byHost.get(origin.hostname) ?? []
      list.push(entry)
      this.byHost.set(origin.hostname, list)
    }
    this.passthrough = new Set(file.passthrough.map((h) => h.toLowerCase()))
  }

  system(systemId: string): ProxySystem | undefined {
    return this.byId.get(systemId)
  }

  /**
   * The system whose origin a forward-mode or transparent request names. A request port
   * must be the upstream's own, or absent/80 (agents talk plain HTTP to the proxy, which
   * speaks the upstream's scheme). Tenants may enrol the same upstream (a shared systems
   * file), so the proxy's own tenant's system is preferred over another tenant's.
   */
  systemForHost(hostname: string, port: number | null, tenantId: string | null): ProxySystem | undefined {
    const candidates = (this.byHost.get(hostname.toLowerCase()) ?? []).filter((s) => {
      const upstreamPort = Number(s.origin.port || (s.origin.protocol === 'https:' ? 443 : 80))
      return port === null || port === upstreamPort || port === 80
    })
    return (tenantId ? candidates.find((s) => enrolledFor(s.system, tenantId)) : undefined) ?? candidates[0]
  }

  /**
   * The verb (and target) a request maps to, or null for an unmapped request: the first route,
   * in file order, whose method and pattern match. Patterns compare leniently (any case, one
   * trailing slash), so two routes may both match; the earlier one decides.
   */
  match(s: ProxySystem, method: string, path: string): RouteMatch | null {
    return s.routes.match(method, path)
  }

  systems(): ProxySystem[] {
    return [...this.byId.values()]
  }

  close(): void {
    for (const s of this.byId.values()) s.agent.destroy()
  }
}
