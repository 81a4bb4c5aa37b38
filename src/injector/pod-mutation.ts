import { canonicalJson } from '../core/jcs.js'
import {
  SHARED_PROCESSES,
  secretsOfVolume,
  secretsReferencedBy,
  sharesProcesses,
  wayAround,
} from './container-exposure.js'
import {
  type AnnotationDefaults,
  INJECTED_LABEL,
  INJECTED_LABEL_VALUE,
  type InjectionRequest,
  readInjectionAnnotations,
} from './injection-annotations.js'
import { type JsonPatchOp, pointer } from './jsonpatch.js'
import type { Container, EnvVar, Pod, Volume, VolumeMount } from './kube-types.js'
import {
  AGENT_VOLUMES,
  agentEnv,
  agentMounts,
  CA_BUNDLE_CONTAINER,
  caBundleInitContainer,
  enforceInitContainer,
  INIT_CONTAINER,
  PROXY_CONTAINER,
  PROXY_UID,
  proxyContainer,
  proxyVolumes,
  type SidecarOptions,
  WRITEGATE_CONTAINERS,
} from './proxy-sidecar.js'

export interface InjectorOptions extends SidecarOptions {
  defaults: AnnotationDefaults
}

export type PodMutation =
  /** Not annotated for injection: admitted untouched. */
  | { outcome: 'skipped' }
  /** The operations that bring the pod to its injected state; empty when it is there already. */
  | { outcome: 'injected'; patch: JsonPatchOp[]; request: InjectionRequest }
  /** Asked for injection but cannot be gated safely: refused with a message for `kubectl`. */
  | { outcome: 'rejected'; message: string }

/**
 * What a volume points at, and which of its keys it exposes under which paths; the API server
 * fills in defaults (defaultMode, …) that a comparison must ignore. The keys count: a pod's own
 * `writegate-ca-cert` naming the CA's Secret without `items` (or remapping `ca.key` to `ca.crt`)
 * would hand the agents the interception CA's private key.
 */
function volumeSource(v: Volume): string {
  const items = (list: { key: string; path: string }[] | undefined) =>
    JSON.stringify((list ?? null) && list?.map((i) => [i.key, i.path]))
  if (v.configMap) return `configMap:${v.configMap.name}:${items(v.configMap.items)}`
  if (v.secret) return `secret:${v.secret.secretName}:${items(v.secret.items)}`
  if (v.emptyDir) return 'emptyDir'
  return 'other'
}

const PROBES = ['livenessProbe', 'readinessProbe', 'startupProbe'] as const

/**
 * A container as the API server sends it back: with the defaults it fills in (Kubernetes'
 * SetDefaults_Container, _Probe, _ContainerPort, _ObjectFieldSelector) on a copy.
 */
function withServerDefaults(container: Container): Record<string, unknown> {
  const c = structuredClone(container) as Record<string, unknown> & Container
  c.terminationMessagePath ??= '/dev/termination-log'
  c.terminationMessagePolicy ??= 'File'
  c.imagePullPolicy ??= /:latest$|^[^:@]*$/.test(c.image ?? '') ? 'Always' : 'IfNotPresent'
  for (const name of PROBES) {
    const p = c[name] as Record<string, unknown> | undefined
    if (!p) continue
    p.timeoutSeconds ??= 1
    p.periodSeconds ??= 10
    p.successThreshold ??= 1
    p.failureThreshold ??= 3
    const http = p.httpGet as Record<string, unknown> | undefined
    if (http) http.scheme ??= 'HTTP'
  }
  for (const port of (c.ports ?? []) as unknown as Record<string, unknown>[]) port.protocol ??= 'TCP'
  for (const e of c.env ?? []) {
    const ref = (e.valueFrom as { fieldRef?: Record<string, unknown> } | undefined)?.fieldRef
    if (ref) ref.apiVersion ??= 'v1'
  }
  return c
}

/**
 * A container under one of the injector's names must be the one it would inject: a pod that
 * brings its own `writegate-proxy` (any image, UID 1337, which the enforce rules let through)
 * or an empty `writegate-init` would otherwise be taken as injected already, and go ungated.
 */
function impostor(pod: Pod, req: InjectionRequest, opts: InjectorOptions): string | undefined {
  const expected = new Map<string, Container>([[PROXY_CONTAINER, proxyContainer(req, opts)]])
  if (req.enforce) expected.set(INIT_CONTAINER, enforceInitContainer(opts, req))
  if (req.tlsCaSecret) expected.set(CA_BUNDLE_CONTAINER, caBundleInitContainer(opts))
  for (const c of [...(pod.spec.initContainers ?? []), ...pod.spec.containers]) {
    if (!WRITEGATE_CONTAINERS.has(c.name)) continue
    const want = expected.get(c.name)
    // All of it, key order aside: a lifecycle hook or an exec probe would run as the proxy too.
    if (!want || canonicalJson(withServerDefaults(c)) !== canonicalJson(withServerDefaults(want)))
      return `container ${c.name} has a name reserved for writegate but is not the container it injects`
  }
  return undefined
}

/** The order the injector puts its init containers in, ahead of every other. */
const INIT_ORDER = [CA_BUNDLE_CONTAINER, INIT_CONTAINER, PROXY_CONTAINER]

/**
 * Writegate's init containers a pod already has (copied from an injected pod, say) must be
 * where the injector puts them: first, in its order. Otherwise a container of the pod's own (a
 * native sidecar, say) would run before the iptables rules and hold a connection they never see.
 */
function outOfOrder(inits: Container[]): string | undefined {
  const names = inits.map((c) => c.name)
  const ours = names.filter((n) => WRITEGATE_CONTAINERS.has(n))
  const prefix = names.slice(0, ours.length)
  const ordered = [...ours].sort((a, b) => INIT_ORDER.indexOf(a) - INIT_ORDER.indexOf(b))
  if (prefix.join('\n') !== ordered.join('\n'))
    return `writegate's init containers (${ours.join(', ')}) must come first, in the order ${INIT_ORDER.join(', ')}, before any of the pod's own`
  return undefined
}

/** Reasons this pod cannot be gated as asked; the first one found is reported. */
function conflicts(
  pod: Pod,
  req: InjectionRequest,
  opts: InjectorOptions,
  ours: Volume[],
): string | undefined {
  const spec = pod.spec
  if (spec.hostNetwork)
    return 'writegate cannot inject into a pod with hostNetwork: true (the proxy and its rules would act on the node)'
  const fake = impostor(pod, req, opts)
  if (fake) return fake
  const misplaced = outOfOrder(spec.initContainers ?? [])
  if (misplaced) return misplaced
  // Port 53 to the pod's nameservers is let through the enforce rules (they are read from the
  // pod's resolv.conf): a nameserver the pod names itself would be a way out on its own.
  if (req.enforce && (spec.dnsConfig?.nameservers?.length ?? 0) > 0)
    return "under writegate.io/enforce a pod cannot name its own nameservers (dnsConfig.nameservers): DNS to them would pass the proxy's rules"
  // Mounted among the credentials a system's `fromFile` may read, the proxy's own Secret (its
  // API key, the Redis URL and password) or the CA's key could be sent to a tenant's upstream.
  // The installation's defaults too: a pod naming a decoy Secret of its own for its proxy would
  // otherwise be free to hand its agents (or its proxy's credentials) the real ones.
  const writegates = writegateSecrets(opts.defaults, req)
  const own = req.credentialSecrets.find((s) => writegates.has(s))
  if (own)
    return `Secret ${own} is writegate's own (the proxy's or the interception CA's) and cannot be a credential Secret`
  const others = [...(spec.initContainers ?? []), ...spec.containers].filter(
    (c) => !WRITEGATE_CONTAINERS.has(c.name),
  )
  const reservedPorts = [
    opts.proxy.port,
    opts.proxy.metricsPort,
    ...(req.tlsCaSecret ? [opts.proxy.tlsPort] : []),
  ]
  for (const c of others) {
    const clash = (c.ports ?? []).find((p) => reservedPorts.includes(p.containerPort))
    if (clash)
      return `container ${c.name} uses port ${clash.containerPort}, which the writegate proxy needs in this pod`
  }
  const ourNames = new Set(ours.map((v) => v.name))
  // Agents mount the CA certificate and bundle the injector gave them; the rest is the proxy's.
  const proxyOnly = new Set([...ourNames].filter((n) => !AGENT_VOLUMES.includes(n)))
  for (const c of others) {
    const mount = (c.volumeMounts ?? []).find((m) => proxyOnly.has(m.name))
    if (mount) return `container ${c.name} mounts ${mount.name}, which is reserved for the writegate proxy`
  }
  for (const v of spec.volumes ?? []) {
    const mine = ours.find((o) => o.name === v.name)
    if (mine && volumeSource(mine) !== volumeSource(v))
      return `volume name ${v.name} is reserved for the writegate proxy`
  }
  // The point of the proxy is that agents never hold these: refuse a pod that hands them over anyway.
  const protectedSecrets = new Set([...writegates, ...req.credentialSecrets])
  for (const c of others) {
    const leaked = secretsReferencedBy(c).find((s) => protectedSecrets.has(s))
    if (leaked) return `container ${c.name} reads Secret ${leaked}, which only the writegate proxy may hold`
  }
  for (const v of spec.volumes ?? []) {
    if (ourNames.has(v.name)) continue
    const leaked = secretsOfVolume(v).find((s) => protectedSecrets.has(s))
    if (leaked) return `volume ${v.name} exposes Secret ${leaked}, which only the writegate proxy may hold`
  }
  if (req.enforce)
    for (const c of others) {
      const way = wayAround(spec.securityContext, c.securityContext)
      if (way)
        return `container ${c.name} ${way}: under writegate.io/enforce it could get around the proxy's rules, which let UID ${PROXY_UID} through`
    }
  // Processes shared: a container that is or can become the proxy's UID reads the proxy's
  // files (its credentials, its key) through /proc/<pid>/root, enforced or not.
  if (sharesProcesses(spec))
    for (const c of others) {
      const way = wayAround(spec.securityContext, c.securityContext)
      if (way) return `container ${c.name} ${way}: ${SHARED_PROCESSES}`
    }
  return undefined
}

function envOps(containerIndex: number, current: EnvVar[] | undefined, desired: EnvVar[]): JsonPatchOp[] {
  if (current === undefined)
    return [{ op: 'add', path: pointer('spec', 'containers', containerIndex, 'env'), value: desired }]
  const ops: JsonPatchOp[] = []
  for (const want of desired) {
    // The last entry of a name is the one Kubernetes uses.
    const at = current.findLastIndex((e) => e.name === want.name)
    if (at < 0)
      ops.push({ op: 'add', path: pointer('spec', 'containers', containerIndex, 'env', '-'), value: want })
    else if (current[at]?.value !== want.value || current[at]?.valueFrom !== undefined)
      ops.push({ op: 'replace', path: pointer('spec', 'containers', containerIndex, 'env', at), value: want })
  }
  return ops
}

/** The agent-side mounts a container lacks (by name). */
function mountOps(
  containerIndex: number,
  current: VolumeMount[] | undefined,
  desired: VolumeMount[],
): JsonPatchOp[] {
  const have = new Set((current ?? []).map((m) => m.name))
  return appendOps(
    ['spec', 'containers', String(containerIndex), 'volumeMounts'],
    current,
    desired.filter((m) => !have.has(m.name)),
  )
}

/**
 * Adds the init containers of ours a pod lacks, each at its place in INIT_ORDER among those it
 * has (which conflicts() found first, in that order): a pod that brings its own CA bundle
 * container gets the rest after it, not before. JSON Patch `add` at an index shifts the rest.
 */
function initContainerOps(current: Container[] | undefined, missing: Container[]): JsonPatchOp[] {
  if (missing.length === 0) return []
  if (current === undefined) return [{ op: 'add', path: pointer('spec', 'initContainers'), value: missing }]
  const placed = current.map((c) => c.name).filter((n) => INIT_ORDER.includes(n))
  const ops: JsonPatchOp[] = []
  for (const c of [...missing].sort((a, b) => INIT_ORDER.indexOf(a.name) - INIT_ORDER.indexOf(b.name))) {
    const at = placed.filter((n) => INIT_ORDER.indexOf(n) < INIT_ORDER.indexOf(c.name)).length
    ops.push({ op: 'add', path: pointer('spec', 'initContainers', String(at)), value: c })
    placed.splice(at, 0, c.name)
  }
  return ops
}

function appendOps(path: string[], current: unknown[] | undefined, items: unknown[]): JsonPatchOp[] {
  if (items.length === 0) return []
  if (current === undefined) return [{ op: 'add', path: pointer(...path), value: items }]
  return items.map((value) => ({ op: 'add', path: pointer(...path, '-'), value }))
}

/**
 * The Secrets only writegate's proxies may hold: the installation's default proxy and CA Secrets,
 * and those a pod's annotations name instead.
 */
export function writegateSecrets(
  defaults: InjectorOptions['defaults'],
  req?: { proxySecret: string; tlsCaSecret: string | null },
): Set<string> {
  return new Set(
    [defaults.proxySecret, defaults.tlsCaSecret, req?.proxySecret, req?.tlsCaSecret].filter(
      (s): s is string => typeof s === 'string',
    ),
  )
}

/** Why a pod that is not injected may not run: it reads a Secret only writegate's proxies may hold. */
function heldByProxiesOnly(pod: Pod, defaults: InjectorOptions['defaults']): string | undefined {
  const only = writegateSecrets(defaults)
  const spec = pod.spec
  // Ephemeral containers come later, by pods/ephemeralcontainers (the API server refuses them here).
  for (const c of [...(spec.initContainers ?? []), ...spec.containers]) {
    const leaked = secretsReferencedBy(c as Container).find((s) => only.has(s))
    if (leaked)
      return `container ${c.name} reads Secret ${leaked}, which only the writegate proxy may hold (annotate the pod writegate.io/inject: "true")`
  }
  for (const v of spec.volumes ?? []) {
    const leaked = secretsOfVolume(v).find((s) => only.has(s))
    if (leaked)
      return `volume ${v.name} exposes Secret ${leaked}, which only the writegate proxy may hold (annotate the pod writegate.io/inject: "true")`
  }
  return undefined
}

/**
 * The JSON Patch that injects gate-proxy into a pod, computed as the difference between the
 * pod and its injected state. Applying it and asking again gives an empty patch, so a
 * reinvoked webhook, or a pod that was injected before, changes nothing.
 */
export function mutatePod(pod: Pod, opts: InjectorOptions): PodMutation {
  const reading = readInjectionAnnotations(pod.metadata?.annotations, opts.defaults)
  if (reading.kind === 'not-requested') {
    // Not injected, so not gated: it may not hold what only a proxy may (the proxy's Secret has
    // the Redis URL every tenant's decision state is behind). Secrets named by a pod's own
    // annotations are unknown here; the defaults are what a namespace usually holds.
    const held = heldByProxiesOnly(pod, opts.defaults)
    return held ? { outcome: 'rejected', message: held } : { outcome: 'skipped' }
  }
  if (reading.kind === 'invalid') return { outcome: 'rejected', message: reading.message }
  const req = reading.request
  const spec = pod.spec
  const volumes = proxyVolumes(req, opts)
  const problem = conflicts(pod, req, opts, volumes)
  if (problem) return { outcome: 'rejected', message: problem }

  const patch: JsonPatchOp[] = []
  const labels = pod.metadata?.labels
  if (pod.metadata === undefined)
    patch.push({
      op: 'add',
      path: '/metadata',
      value: { labels: { [INJECTED_LABEL]: INJECTED_LABEL_VALUE } },
    })
  else if (labels === undefined)
    patch.push({ op: 'add', path: '/metadata/labels', value: { [INJECTED_LABEL]: INJECTED_LABEL_VALUE } })
  else if (labels[INJECTED_LABEL] !== INJECTED_LABEL_VALUE)
    patch.push({
      op: labels[INJECTED_LABEL] === undefined ? 'add' : 'replace',
      path: pointer('metadata', 'labels', INJECTED_LABEL),
      value: INJECTED_LABEL_VALUE,
    })

  const haveVolumes = new Set((spec.volumes ?? []).map((v) => v.name))
  patch.push(
    ...appendOps(
      ['spec', 'volumes'],
      spec.volumes,
      volumes.filter((v) => !haveVolumes.has(v.name)),
    ),
  )

  const present = new Set([...(spec.initContainers ?? []), ...spec.containers].map((c) => c.name))
  const inits: Container[] = []
  // Ours run first, in this order: the agents' CA bundle (it needs no network); the iptables
  // rules, so that no container of the pod, its own init containers included, has a moment of
  // ungated network; the proxy, as a native sidecar, so that those init containers are gated
  // like the rest (without native sidecars they find no proxy yet, and their connections fail).
  if (req.tlsCaSecret && !present.has(CA_BUNDLE_CONTAINER)) inits.push(caBundleInitContainer(opts))
  if (req.enforce && !present.has(INIT_CONTAINER)) inits.push(enforceInitContainer(opts, req))
  const proxyMissing = !present.has(PROXY_CONTAINER)
  if (proxyMissing && opts.proxy.nativeSidecar) inits.push(proxyContainer(req, opts))
  patch.push(...initContainerOps(spec.initContainers, inits))

  const desiredEnv = agentEnv(req, opts)
  const desiredMounts = agentMounts(req)
  spec.containers.forEach((c, i) => {
    if (c.name === PROXY_CONTAINER) return
    patch.push(...envOps(i, c.env, desiredEnv))
    patch.push(...mountOps(i, c.volumeMounts, desiredMounts))
  })
  if (proxyMissing && !opts.proxy.nativeSidecar)
    patch.push({ op: 'add', path: pointer('spec', 'containers', '-'), value: proxyContainer(req, opts) })

  return { outcome: 'injected', patch, request: req }
}
