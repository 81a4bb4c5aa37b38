import { canonicalJson } from '../core/jcs.js'
import {
  SHARED_PROCESSES,
  secretsOfVolume,
  secretsReferencedBy,
  sharesProcesses,
  wayAround,
} from './container-exposure.js'
import type { Container, EphemeralContainer, Pod } from './kube-types.js'
import {
  AGENT_VOLUMES,
  INIT_CONTAINER,
  PROXY_CONTAINER,
  PROXY_UID,
  WRITEGATE_CONTAINERS,
} from './proxy-sidecar.js'

export type PodUpdateVerdict =
  /** Not a pod writegate injected: nothing of it to guard. */
  | { outcome: 'ignored' }
  | { outcome: 'allowed' }
  /** Refused with a message for `kubectl`. */
  | { outcome: 'rejected'; message: string }

const containersOf = (pod: Pod): Container[] => [...(pod.spec.initContainers ?? []), ...pod.spec.containers]

/**
 * A change to a running pod that writegate injected (pods UPDATE, and the
 * pods/ephemeralcontainers and pods/resize subresources). Kubernetes lets little of a pod change
 * once it is created, but two changes could take its writes around the gate:
 * - writegate's own containers changed: an image swapped on `writegate-proxy` for one that gates
 *   nothing, or on `writegate-init` (were the pod's sandbox recreated, it would run again), or
 *   the proxy resized out of memory;
 * - an ephemeral container (`kubectl debug`) that could do what the injector refuses of the pod's
 *   own containers: mount the proxy's volumes, read the Secrets only it may hold, run as the
 *   proxy's UID (which the enforce rules let through) or as root, or join the proxy's processes.
 * What is judged is read off the pod as it was (the proxy's mounts and Secrets, whether the
 * enforce rules are in it), not off its annotations or today's settings, which may have changed.
 * Everything else passes: labels (`kubectl debug` removes them first), annotations, an agent's
 * image. The API server picks the pods it sends by their containers, not by a label, which a
 * status update could remove.
 */
export function reviewPodUpdate(
  before: Pod,
  after: Pod,
  /** The installation's own Secrets (writegateSecrets): never an ephemeral container's, whatever this pod's proxy names. */
  writegates: ReadonlySet<string> = new Set(),
): PodUpdateVerdict {
  const proxy = containersOf(before).find((c) => c.name === PROXY_CONTAINER)
  if (!proxy) return { outcome: 'ignored' }

  for (const name of WRITEGATE_CONTAINERS) {
    const was = containersOf(before).find((c) => c.name === name)
    const is = containersOf(after).find((c) => c.name === name)
    if (was === undefined && is === undefined) continue
    if (was === undefined || is === undefined || canonicalJson(was) !== canonicalJson(is))
      return {
        outcome: 'rejected',
        message: `container ${name} was injected by writegate and cannot be changed, its image included (recreate the pod instead)`,
      }
  }

  const had = new Set((before.spec.ephemeralContainers ?? []).map((c) => c.name))
  const added = (after.spec.ephemeralContainers ?? []).filter((c) => !had.has(c.name))
  for (const c of added) {
    const problem = exposure(before, proxy, c, writegates)
    if (problem) return { outcome: 'rejected', message: `ephemeral container ${c.name} ${problem}` }
  }
  return { outcome: 'allowed' }
}

/** What an ephemeral container added to an injected pod could reach or get around, if anything. */
function exposure(
  pod: Pod,
  proxy: Container,
  c: EphemeralContainer,
  writegates: ReadonlySet<string>,
): string | undefined {
  if (WRITEGATE_CONTAINERS.has(c.name)) return 'has a name reserved for writegate'
  if (c.targetContainerName !== undefined && WRITEGATE_CONTAINERS.has(c.targetContainerName))
    return `targets ${c.targetContainerName}: it would share the proxy's processes, and through them what the proxy holds`
  const proxyVolumes = new Set(
    (proxy.volumeMounts ?? []).map((m) => m.name).filter((n) => !AGENT_VOLUMES.includes(n)),
  )
  const mount = (c.volumeMounts ?? []).find((m) => proxyVolumes.has(m.name))
  if (mount) return `mounts ${mount.name}, which is reserved for the writegate proxy`
  const protectedSecrets = new Set([
    ...writegates,
    ...secretsReferencedBy(proxy),
    ...(pod.spec.volumes ?? []).filter((v) => proxyVolumes.has(v.name)).flatMap(secretsOfVolume),
  ])
  const leaked = secretsReferencedBy(c).find((s) => protectedSecrets.has(s))
  if (leaked) return `reads Secret ${leaked}, which only the writegate proxy may hold`
  // Where the enforce rules are, a container that is or can become UID 1337 gets around them;
  // where processes are shared, it could read the proxy's files through /proc.
  const enforced = containersOf(pod).some((x) => x.name === INIT_CONTAINER)
  if (enforced || sharesProcesses(pod.spec)) {
    const way = wayAround(pod.spec.securityContext, c.securityContext)
    if (way)
      return enforced
        ? `${way}: under writegate.io/enforce it could get around the proxy's rules, which let UID ${PROXY_UID} through`
        : `${way}: ${SHARED_PROCESSES}`
  }
  return undefined
}
