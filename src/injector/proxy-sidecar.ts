import type { InjectionRequest } from './injection-annotations.js'
import { iptablesInitScript } from './iptables-rules.js'
import type { Container, EnvVar, Volume, VolumeMount } from './kube-types.js'

/**
 * What the injector adds to a pod: the gate-proxy container with its route table, key and
 * upstream credentials (mounted into it alone), the agents' proxy variables, and, when
 * enforced, the iptables init container. Pure functions of the request and the options.
 */

export const PROXY_CONTAINER = 'writegate-proxy'
export const INIT_CONTAINER = 'writegate-init'
/** The proxy's UID: the iptables owner match exempts exactly this user's traffic. */
export const PROXY_UID = 1337

export const ROUTES_DIR = '/etc/writegate/routes'
export const PROXY_SECRET_DIR = '/var/run/writegate/proxy'
export const CREDENTIALS_DIR = '/var/run/writegate/credentials'
/** Keys of the proxy Secret named by writegate.io/api-key-secret. */
export const API_KEY_KEY = 'api-key'
export const REDIS_URL_KEY = 'redis-url'

export const VOLUMES = {
  routes: 'writegate-routes',
  proxySecret: 'writegate-proxy-secret',
  tmp: 'writegate-tmp',
  /** One per credential Secret, by position: names stay short and valid whatever the Secret is called. */
  credential: (i: number) => `writegate-credential-${i}`,
} as const

export interface ResourceList {
  cpu?: string
  memory?: string
}

export interface SidecarOptions {
  proxy: {
    image: string
    imagePullPolicy: string
    port: number
    metricsPort: number
    routesKey: string
    logLevel: string
    nativeSidecar: boolean
    noProxy: readonly string[]
    resources: { requests: ResourceList; limits: ResourceList }
  }
  enforce: {
    image?: string | undefined
    excludeOutboundCidrs: readonly string[]
    excludeOutboundPorts: readonly number[]
  }
}

function resourceList(r: ResourceList): Record<string, string> | undefined {
  const out: Record<string, string> = {}
  if (r.cpu !== undefined) out.cpu = r.cpu
  if (r.memory !== undefined) out.memory = r.memory
  return Object.keys(out).length > 0 ? out : undefined
}

export function proxyUrl(opts: SidecarOptions): string {
  return `http://127.0.0.1:${opts.proxy.port}`
}

/** The variables every agent container gets, in order. Values only: nothing secret. */
export function agentEnv(req: InjectionRequest, opts: SidecarOptions): EnvVar[] {
  const proxy = proxyUrl(opts)
  const noProxy = ['127.0.0.1', 'localhost', '::1', ...opts.proxy.noProxy].join(',')
  return [
    { name: 'HTTP_PROXY', value: proxy },
    { name: 'http_proxy', value: proxy },
    { name: 'NO_PROXY', value: noProxy },
    { name: 'no_proxy', value: noProxy },
    ...req.baseUrls.map((b) => ({ name: b.env, value: `${proxy}/${b.systemId}` })),
  ]
}

export function proxyVolumes(req: InjectionRequest, opts: SidecarOptions): Volume[] {
  return [
    ...(req.routesConfigMap
      ? [
          {
            name: VOLUMES.routes,
            configMap: {
              name: req.routesConfigMap,
              items: [{ key: opts.proxy.routesKey, path: opts.proxy.routesKey }],
            },
          },
        ]
      : []),
    {
      name: VOLUMES.proxySecret,
      secret: { secretName: req.proxySecret, items: [{ key: API_KEY_KEY, path: API_KEY_KEY }] },
    },
    ...req.credentialSecrets.map((s, i) => ({ name: VOLUMES.credential(i), secret: { secretName: s } })),
    { name: VOLUMES.tmp, emptyDir: {} },
  ]
}

export function proxyContainer(req: InjectionRequest, opts: SidecarOptions): Container {
  const p = opts.proxy
  const mounts: VolumeMount[] = [
    ...(req.routesConfigMap ? [{ name: VOLUMES.routes, mountPath: ROUTES_DIR, readOnly: true }] : []),
    { name: VOLUMES.proxySecret, mountPath: PROXY_SECRET_DIR, readOnly: true },
    ...req.credentialSecrets.map((s, i) => ({
      name: VOLUMES.credential(i),
      mountPath: `${CREDENTIALS_DIR}/${s}`,
      readOnly: true,
    })),
    { name: VOLUMES.tmp, mountPath: '/tmp' },
  ]
  const requests = resourceList(p.resources.requests)
  const limits = resourceList(p.resources.limits)
  const container: Container = {
    name: PROXY_CONTAINER,
    image: p.image,
    imagePullPolicy: p.imagePullPolicy,
    args: ['proxy'],
    ports: [
      { name: 'wg-proxy', containerPort: p.port, protocol: 'TCP' },
      { name: 'wg-metrics', containerPort: p.metricsPort, protocol: 'TCP' },
    ],
    env: [
      // Every interface, whatever the image's defaults: iptables redirects both families to the
      // proxy port, and the kubelet probes and Prometheus scrapes reach it on the pod's IP.
      { name: 'WRITEGATE_PROXY_HOST', value: '::' },
      { name: 'WRITEGATE_PROXY_PORT', value: String(p.port) },
      { name: 'WRITEGATE_METRICS_HOST', value: '0.0.0.0' },
      { name: 'WRITEGATE_METRICS_PORT', value: String(p.metricsPort) },
      ...(req.routesConfigMap
        ? [{ name: 'WRITEGATE_ROUTES_FILE', value: `${ROUTES_DIR}/${p.routesKey}` }]
        : []),
      // Only the credential Secrets given to this pod may be injected (credentials.allow*).
      ...(req.credentialSecrets.length > 0
        ? [{ name: 'WRITEGATE_CREDENTIALS_ALLOW_FILES', value: CREDENTIALS_DIR }]
        : []),
      ...(req.credentialEnv.length > 0
        ? [{ name: 'WRITEGATE_CREDENTIALS_ALLOW_ENV', value: req.credentialEnv.join(',') }]
        : []),
      { name: 'WRITEGATE_PROXY_API_KEY_FILE', value: `${PROXY_SECRET_DIR}/${API_KEY_KEY}` },
      {
        name: 'WRITEGATE_REDIS_URL',
        valueFrom: { secretKeyRef: { name: req.proxySecret, key: REDIS_URL_KEY } },
      },
      { name: 'WRITEGATE_LOG_LEVEL', value: p.logLevel },
    ],
    // Credentials named by `credential.fromEnv` in the route table; `fromFile` paths are under CREDENTIALS_DIR.
    ...(req.credentialSecrets.length > 0
      ? { envFrom: req.credentialSecrets.map((name) => ({ secretRef: { name } })) }
      : {}),
    volumeMounts: mounts,
    ...(requests || limits
      ? { resources: { ...(requests ? { requests } : {}), ...(limits ? { limits } : {}) } }
      : {}),
    securityContext: {
      runAsUser: PROXY_UID,
      runAsGroup: PROXY_UID,
      runAsNonRoot: true,
      readOnlyRootFilesystem: true,
      allowPrivilegeEscalation: false,
      capabilities: { drop: ['ALL'] },
      seccompProfile: { type: 'RuntimeDefault' },
    },
    livenessProbe: { httpGet: { path: '/healthz', port: p.port }, periodSeconds: 10, failureThreshold: 3 },
    readinessProbe: { httpGet: { path: '/readyz', port: p.port }, periodSeconds: 5, failureThreshold: 2 },
  }
  if (p.nativeSidecar) {
    // Agents start only after this passes: their first write already has a loaded policy snapshot.
    container.startupProbe = {
      httpGet: { path: '/readyz', port: p.port },
      periodSeconds: 1,
      failureThreshold: 120,
    }
    container.restartPolicy = 'Always'
  }
  return container
}

/** Root only here, and only with the capabilities iptables needs; it exits before any agent runs. */
export function enforceInitContainer(opts: SidecarOptions): Container {
  return {
    name: INIT_CONTAINER,
    image: opts.enforce.image ?? opts.proxy.image,
    imagePullPolicy: opts.proxy.imagePullPolicy,
    command: [
      'sh',
      '-c',
      iptablesInitScript({
        proxyUid: PROXY_UID,
        proxyPort: opts.proxy.port,
        excludeOutboundCidrs: opts.enforce.excludeOutboundCidrs,
        excludeOutboundPorts: opts.enforce.excludeOutboundPorts,
      }),
    ],
    resources: { requests: { cpu: '10m', memory: '16Mi' }, limits: { cpu: '100m', memory: '64Mi' } },
    securityContext: {
      runAsUser: 0,
      runAsGroup: 0,
      runAsNonRoot: false,
      readOnlyRootFilesystem: false,
      allowPrivilegeEscalation: false,
      capabilities: { add: ['NET_ADMIN', 'NET_RAW'], drop: ['ALL'] },
    },
  }
}
