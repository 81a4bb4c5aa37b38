import type { IncomingMessage } from 'node:http'
import { ERRORS, type ErrorDef } from '../core/errors.js'
import { carriesMethodOverride } from '../systems/method-override-query.js'
import { unsafePathProblem } from '../systems/safe-path.js'
import { sameAuthority } from './same-authority.js'

export type TargetMode = 'reverse' | 'forward' | 'transparent'

export type RefusedTarget = { ok: false; def: ErrorDef; error: string }

/** Which system a request names (by id or by upstream host) and the upstream path, before any system is looked up. */
export type ParsedTarget =
  | { ok: true; mode: 'reverse'; systemId: string; path: string }
  | {
      ok: true
      mode: 'forward' | 'transparent'
      hostname: string
      port: number | null
      path: string
      /** Inside an intercepted tunnel: only an https system at exactly `port` is this request's. */
      tunnel?: true
    }

/** A refusal from the error registry: its code and status, and its text unless a more precise one is given. */
export function refused(def: ErrorDef, error: string = def.message): RefusedTarget {
  return { ok: false, def, error }
}

function hostPort(host: string): { hostname: string; port: number | null } {
  const m = /^\[?([^\]]+?)\]?(?::(\d+))?$/.exec(host.trim())
  return { hostname: (m?.[1] ?? host).toLowerCase(), port: m?.[2] ? Number(m[2]) : null }
}

/**
 * A target named by host. In a tunnel the authority is the tunnel's, already checked against the
 * Host or the target; on the TLS port (which knows no port, only the SNI) the Host's port, else
 * 443, names it. Built whole, once: every HTTPS write passes here, and copying the object to add
 * the tunnel's fields cost more than the rest of the parse.
 */
function byHost(
  mode: 'forward' | 'transparent',
  hostname: string,
  port: number | null,
  path: string,
  tunnel: { host: string; port: number | null } | undefined,
): ParsedTarget {
  if (tunnel === undefined) return { ok: true, mode, hostname, port, path }
  return { ok: true, mode, hostname, port: tunnel.port ?? port ?? 443, path, tunnel: true }
}

/**
 * Reads the request target the three ways agents send it:
 * - forward mode: an absolute URI naming an upstream host (agents that honour HTTP_PROXY);
 * - reverse mode: `/<systemId>/<path>`;
 * - transparent mode: origin-form, the upstream named by the Host header (iptables redirection).
 * Paths an upstream could read as another path are refused here, before anything is looked
 * up: the origin always comes from an enrolled system, never from the request.
 *
 * Inside an intercepted tunnel (`tunnel`: the authority it was opened for, which the Host was
 * checked against) every path is the upstream's, `/sys_x/…` included, and an absolute URI may
 * name only the tunnel's authority: a request cannot leave the host its certificate was minted for.
 */
export function parseTarget(
  req: IncomingMessage,
  tunnel?: { host: string; port: number | null },
): ParsedTarget | RefusedTarget {
  const raw = req.url ?? '/'
  let parsed: ParsedTarget
  if (/^https?:\/\//i.test(raw)) {
    let url: URL
    try {
      url = new URL(raw)
    } catch {
      return refused(ERRORS.invalidRequest, 'malformed request target')
    }
    if (url.username || url.password)
      return refused(ERRORS.invalidRequest, 'credentials in the request target are not allowed')
    if (tunnel !== undefined && (url.protocol !== 'https:' || !sameAuthority(url.host, tunnel)))
      return refused(ERRORS.misdirectedRequest, 'the request target names another host than the tunnel')
    // The raw path as sent (not URL-normalised), so what is checked is what the agent sent.
    const authorityStart = raw.indexOf('//') + 2
    const slash = raw.indexOf('/', authorityStart)
    const qmark = raw.indexOf('?', authorityStart)
    let path: string
    if (qmark !== -1 && (slash === -1 || qmark < slash)) path = `/${raw.slice(qmark)}`
    else path = slash === -1 ? '/' : raw.slice(slash)
    parsed = byHost(
      'forward',
      url.hostname.replace(/^\[|\]$/g, '').toLowerCase(),
      url.port ? Number(url.port) : null,
      path,
      tunnel,
    )
  } else {
    const m = tunnel === undefined ? /^\/(sys_[A-Za-z0-9_-]+)(\/.*|\?.*)?$/.exec(raw) : null
    if (m) {
      let path = m[2] ?? '/'
      if (path.startsWith('?')) path = `/${path}`
      parsed = { ok: true, mode: 'reverse', systemId: m[1] as string, path }
    } else {
      const { hostname, port } = hostPort(req.headers.host ?? '')
      parsed = byHost('transparent', hostname, port, raw, tunnel)
    }
  }
  const problem = unsafePathProblem(parsed.path)
  if (problem) return refused(ERRORS.unsafePath, `refused path: ${problem}`)
  if (carriesMethodOverride(parsed.path)) return refused(ERRORS.methodOverride)
  return parsed
}
