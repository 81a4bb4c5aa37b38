import type { IncomingMessage } from 'node:http'
import { ERRORS, type ErrorDef } from '../core/errors.js'
import { unsafePathProblem } from '../systems/safe-path.js'
import { carriesMethodOverride } from './method-override.js'
import type { ProxySystem, RouteTable } from './route-table.js'

export type TargetMode = 'reverse' | 'forward' | 'transparent'

export type RefusedTarget = { ok: false; status: number; error: string; code: string }

export type ResolvedTarget = { ok: true; system: ProxySystem; path: string; mode: TargetMode } | RefusedTarget

/** A refusal from the error registry: its code and status, and its text unless a more precise one is given. */
function refused(def: ErrorDef, error: string = def.message): RefusedTarget {
  return { ok: false, status: def.status, error, code: def.code }
}

function hostPort(host: string): { hostname: string; port: number | null } {
  const m = /^\[?([^\]]+?)\]?(?::(\d+))?$/.exec(host.trim())
  return { hostname: (m?.[1] ?? host).toLowerCase(), port: m?.[2] ? Number(m[2]) : null }
}

/**
 * The one answer for a system this proxy does not serve, whether it does not exist or is
 * another tenant's, in every mode (a system id, an absolute URI's host, a Host header): an
 * agent cannot tell which, nor learn other tenants' system ids or upstream hosts.
 */
export const NOT_ENROLLED: Readonly<RefusedTarget> = Object.freeze(refused(ERRORS.notEnrolled))

/**
 * Which enrolled system a request is for, and the upstream path:
 * - forward mode: an absolute URI naming an enrolled upstream host (agents that honour HTTP_PROXY);
 * - reverse mode: `/<systemId>/<path>`;
 * - transparent mode: origin-form with a Host of an enrolled upstream (iptables redirection).
 * The origin always comes from the route table, never from the request. `tenantId` (the
 * proxy's, once known) picks between tenants' systems on one upstream host; whether the
 * system is enrolled for that tenant is the caller's check.
 */
export function resolveTarget(
  req: IncomingMessage,
  table: RouteTable,
  tenantId: string | null,
): ResolvedTarget {
  const raw = req.url ?? '/'
  let system: ProxySystem | undefined
  let path: string
  let mode: TargetMode
  if (/^https?:\/\//i.test(raw)) {
    let url: URL
    try {
      url = new URL(raw)
    } catch {
      return refused(ERRORS.invalidRequest, 'malformed request target')
    }
    if (url.username || url.password)
      return refused(ERRORS.invalidRequest, 'credentials in the request target are not allowed')
    system = table.systemForHost(url.hostname, url.port ? Number(url.port) : null, tenantId)
    if (!system) return NOT_ENROLLED
    // The raw path as sent (not URL-normalised), so what is checked is what the agent sent.
    const authorityStart = raw.indexOf('//') + 2
    const slash = raw.indexOf('/', authorityStart)
    const qmark = raw.indexOf('?', authorityStart)
    if (qmark !== -1 && (slash === -1 || qmark < slash)) path = `/${raw.slice(qmark)}`
    else path = slash === -1 ? '/' : raw.slice(slash)
    mode = 'forward'
  } else {
    const m = /^\/(sys_[A-Za-z0-9_-]+)(\/.*|\?.*)?$/.exec(raw)
    if (m) {
      system = table.system(m[1] as string)
      if (!system) return NOT_ENROLLED
      path = m[2] ?? '/'
      if (path.startsWith('?')) path = `/${path}`
      mode = 'reverse'
    } else {
      const { hostname, port } = hostPort(req.headers.host ?? '')
      system = hostname ? table.systemForHost(hostname, port, tenantId) : undefined
      // A Host no system enrols gets the answer another tenant's upstream host gets (the
      // caller's check): a different one would tell an agent which hosts other tenants enrol.
      if (!system) return NOT_ENROLLED
      path = raw
      mode = 'transparent'
    }
  }
  const problem = unsafePathProblem(path)
  if (problem) return refused(ERRORS.unsafePath, `refused path: ${problem}`)
  if (carriesMethodOverride(path)) return refused(ERRORS.methodOverride)
  return { ok: true, system, path, mode }
}
