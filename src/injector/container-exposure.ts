import type { Container, PodSpec, Volume } from './kube-types.js'
import { PROXY_UID } from './proxy-sidecar.js'

/**
 * How a container of a gated pod could reach what only the proxy may hold, or get around the
 * proxy's rules: read by the injector for the pod's containers when it is created, and for an
 * ephemeral container added later.
 */

/** The Secrets a container reads through its environment. */
export function secretsReferencedBy(c: Container): string[] {
  const names: string[] = []
  for (const e of c.env ?? []) {
    const ref = (e.valueFrom as { secretKeyRef?: { name?: unknown } } | undefined)?.secretKeyRef
    if (typeof ref?.name === 'string') names.push(ref.name)
  }
  for (const f of c.envFrom ?? []) if (f.secretRef?.name) names.push(f.secretRef.name)
  return names
}

/** The Secrets a volume exposes to whoever mounts it. */
export function secretsOfVolume(v: Volume): string[] {
  const names: string[] = []
  if (v.secret) names.push(v.secret.secretName)
  for (const s of v.projected?.sources ?? []) if (s.secret?.name) names.push(s.secret.name)
  return names
}

/**
 * How a container of an enforced pod could leave the iptables rules: by being UID 1337 (the
 * proxy's, let through), or by becoming it. Root can setuid(1337), and so can a process that
 * gains root through a setuid binary of its image; an unset runAsUser is whatever the image
 * says, 0 or 1337 included. So each container must run as a named user other than those, with
 * no way to escalate (no_new_privs) and unprivileged.
 */
export function wayAround(
  pod: PodSpec['securityContext'],
  own: Container['securityContext'],
): string | undefined {
  const ctx = (own ?? {}) as {
    runAsUser?: unknown
    allowPrivilegeEscalation?: unknown
    privileged?: unknown
    capabilities?: { add?: unknown }
  }
  const uid = ctx.runAsUser ?? pod?.runAsUser
  if (uid === PROXY_UID) return `runs as UID ${PROXY_UID}, the writegate proxy's`
  if (ctx.privileged === true) return 'is privileged'
  if (uid === undefined) return 'sets no runAsUser (its image may run it as root, or as the proxy)'
  if (uid === 0) return 'runs as root'
  if (ctx.allowPrivilegeEscalation !== false)
    return 'may gain privileges (set allowPrivilegeEscalation: false)'
  // A named user without escalation cannot use added capabilities today (Kubernetes sets no
  // ambient ones); these would undo the rules or reach the proxy the day a runtime did.
  const added = Array.isArray(ctx.capabilities?.add) ? (ctx.capabilities.add as unknown[]) : []
  const risky = added.find((c) => typeof c === 'string' && RISKY_CAPABILITIES.has(c.toUpperCase()))
  if (risky) return `adds capability ${risky}`
  return undefined
}

/** Capabilities that change the network's rules, or act as or on another user's processes. */
const RISKY_CAPABILITIES = new Set(
  ['NET_ADMIN', 'SYS_ADMIN', 'SYS_PTRACE', 'SETUID', 'SETGID', 'ALL'].flatMap((c) => [c, `CAP_${c}`]),
)

/**
 * Whether the pod's containers see each other's processes (one process namespace, or the
 * node's): one that is or can become the proxy's UID then reads the proxy's files, its
 * credentials and key, through /proc/<pid>/root.
 */
export function sharesProcesses(spec: PodSpec): boolean {
  return spec.shareProcessNamespace === true || spec.hostPID === true
}

/** Why a container that could become the proxy's UID is refused where processes are shared. */
export const SHARED_PROCESSES = `the pod shares process namespaces (shareProcessNamespace or hostPID), so as UID ${PROXY_UID} it could read the proxy's files`
