import { callProtocolOf } from '../core/call-protocol.js'
import type { SystemRecord } from '../core/enrolled-system.js'
import { ERRORS, type ErrorDef } from '../core/errors.js'
import type { CompiledSnapshot, CompiledSystem } from '../core/snapshot.js'
import type { Plan } from '../gate/gate.js'
import type { ParsedTarget } from './request-target.js'

/** What gate-proxy does with a request, read under one snapshot of its tenant. */
export type ProxyContext =
  /** Refused before any decision: nothing forwarded, no receipt. */
  | { kind: 'refused'; def: ErrorDef; error: string }
  /**
   * An ungated read: forwarded (after a standing check when it carries a credential).
   * `protocol`: a read of an MCP endpoint (its event stream), whose answers may be filtered.
   */
  | { kind: 'pass'; system: SystemRecord; path: string; protocol?: 'mcp' }
  /** A write (or a gated read) mapped to a verb by the system's routes: decided, then forwarded on ALLOW. */
  | { kind: 'write'; system: SystemRecord; path: string }
  /** A request to an MCP or GraphQL endpoint: its body must be read, and each call in it decided. */
  | { kind: 'calls'; system: SystemRecord; path: string; protocol: 'mcp' | 'graphql' }

const READS = new Set(['GET', 'HEAD', 'OPTIONS'])

function isRead(method: string): boolean {
  return READS.has(method)
}

/**
 * Systems a proxy serves besides its tenant's enrolled ones: those of a deprecated route
 * table file. The tenant's own enrolled system wins where both have an id.
 */
export interface LocalSystems {
  byId(systemId: string): CompiledSystem | undefined
  onHost(hostname: string): readonly CompiledSystem[]
  all(): readonly CompiledSystem[]
}

export const NO_LOCAL_SYSTEMS: LocalSystems = { byId: () => undefined, onHost: () => [], all: () => [] }

function defaultPort(s: SystemRecord): number {
  const u = new URL(s.upstream)
  return Number(u.port || (u.protocol === 'https:' ? 443 : 80))
}

/**
 * The system a request names. By host (forward and transparent mode), a request port must be
 * the upstream's own, or absent, 80 (agents talk plain HTTP to the proxy, which speaks the
 * upstream's scheme) or 443 (an intercepted TLS connection).
 */
export function systemOf(
  snap: CompiledSnapshot,
  local: LocalSystems,
  target: ParsedTarget,
): CompiledSystem | undefined {
  if (target.mode === 'reverse') return snap.system(target.systemId) ?? local.byId(target.systemId)
  // A tunnel was opened (its certificate minted) for one https origin: no other system's.
  const fits = target.tunnel
    ? (s: CompiledSystem) => s.record.upstream.startsWith('https:') && defaultPort(s.record) === target.port
    : (s: CompiledSystem) =>
        target.port === null ||
        target.port === 80 ||
        target.port === 443 ||
        target.port === defaultPort(s.record)
  return snap.systemsOnHost(target.hostname).find(fits) ?? local.onHost(target.hostname).find(fits)
}

const NOT_ENROLLED: ProxyContext = {
  kind: 'refused',
  def: ERRORS.notEnrolled,
  error: ERRORS.notEnrolled.message,
}

/**
 * The plan for one request under one snapshot: which of the tenant's systems it is for, and
 * whether its route maps it to a verb. Only the proxy's own tenant's systems exist here, so
 * an unknown system and another tenant's get the same answer (403 not_enrolled). Refusals
 * are confirmed against the tenant's current version: a route or system added a moment ago
 * must not be refused on an older table.
 */
export function planProxyRequest(
  snap: CompiledSnapshot,
  local: LocalSystems,
  target: ParsedTarget,
  method: string,
  /** Whether the request carries a body (a Content-Length above 0 or a Transfer-Encoding). */
  hasBody: boolean,
): Plan<ProxyContext> {
  const compiled = systemOf(snap, local, target)
  if (!compiled) return { kind: 'settle', confirm: true, context: NOT_ENROLLED }
  const system = compiled.record
  // At an MCP or GraphQL endpoint the gate reads the calls of a POST's body (a GraphQL GET's are
  // in its URL): a body on any other request there goes unread, and a server that reads calls
  // from it whatever the method would run them ungated, with the credential (found in review).
  // Unless a route maps the request, it is refused.
  if (
    hasBody &&
    method !== 'POST' &&
    compiled.endpoint?.match(target.path.split('?')[0] as string) &&
    !compiled.routes.match(method, target.path)
  )
    return unmapped(
      `a body on a ${method} to the ${system.kind === 'mcp' ? 'MCP' : 'GraphQL'} endpoint is not read by the gate`,
    )
  const protocol = callProtocolOf(compiled, method, target.path)
  if (protocol)
    return { kind: 'settle', confirm: false, context: { kind: 'calls', system, path: target.path, protocol } }
  const route = compiled.routes.match(method, target.path)
  if (route)
    return {
      kind: 'decide',
      verb: route.verb,
      target: route.target,
      systemId: system.systemId,
      context: { kind: 'write', system, path: target.path },
    }
  // After the route: a mapped write never pays for the endpoint match.
  const onMcpEndpoint =
    system.kind === 'mcp' && (compiled.endpoint?.match(target.path.split('?')[0] as string) ?? null) !== null
  // DELETE on an MCP endpoint ends the agent's session (Streamable HTTP): no write of the
  // upstream's data, so it passes as a read does, unless a route maps it. Only at the endpoint as
  // enrolled, not the lenient match that makes routes gate more (`/MCP/`, `/mcp.json`), which
  // here would let more pass; and only without a body, which a session's end never carries and an
  // upstream may leave unread, to be read as a request of the agent's writing (found in review).
  const endsSession =
    method === 'DELETE' && onMcpEndpoint && !hasBody && target.path.split('?')[0] === system.mcp?.endpoint
  const read = isRead(method) || endsSession
  if (read && system.reads === 'pass')
    return {
      kind: 'settle',
      // A read that carries the injected credential is refused once the key is revoked, so
      // its standing is judged under the current version.
      confirm: system.credential !== undefined || (onMcpEndpoint && system.mcp?.filterToolsList === true),
      context: onMcpEndpoint
        ? { kind: 'pass', system, path: target.path, protocol: 'mcp' }
        : { kind: 'pass', system, path: target.path },
    }
  return unmapped(isRead(method) ? 'unmapped read (reads are gated for this system)' : 'unmapped write')
}

/** Refused as no route maps it, on the tenant's current version (never on an old route table). */
function unmapped(error: string): Plan<ProxyContext> {
  return { kind: 'settle', confirm: true, context: { kind: 'refused', def: ERRORS.unmappedRoute, error } }
}

/**
 * The plan for one call of a body-aware request, under one snapshot: its system must still be
 * there, of the same kind, and map the call to a verb; otherwise the whole request is refused.
 */
export function planCall<_Call>(
  snap: CompiledSnapshot,
  local: LocalSystems,
  target: ParsedTarget,
  method: string,
  protocol: 'mcp' | 'graphql',
  map: (system: SystemRecord) => { verb: string; target: string | null } | null,
): Plan<ProxyContext> {
  const compiled = systemOf(snap, local, target)
  if (!compiled) return { kind: 'settle', confirm: true, context: NOT_ENROLLED }
  if (callProtocolOf(compiled, method, target.path) !== protocol)
    return {
      kind: 'settle',
      confirm: true,
      context: {
        kind: 'refused',
        def: ERRORS.unmappedCall,
        error: 'the system changed while the request was read: send it again',
      },
    }
  const route = map(compiled.record)
  if (!route)
    return {
      kind: 'settle',
      confirm: true,
      context: { kind: 'refused', def: ERRORS.unmappedCall, error: ERRORS.unmappedCall.message },
    }
  return {
    kind: 'decide',
    verb: route.verb,
    target: route.target,
    systemId: compiled.record.systemId,
    context: { kind: 'write', system: compiled.record, path: target.path },
  }
}
