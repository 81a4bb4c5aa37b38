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
/** The interception CA, certificate and key: the proxy's alone. */
export const TLS_CA_DIR = '/var/run/writegate/tls-ca'
/** The interception CA's certificate alone, for agents. */
export const CA_CERT_DIR = '/var/run/writegate/ca'
/** The system CAs plus the interception CA, one PEM bundle, for agents' runtimes. */
export const CA_BUNDLE_DIR = '/var/run/writegate/ca-bundle'
export const CA_BUNDLE_FILE = `${CA_BUNDLE_DIR}/ca-bundle.crt`
export const CA_BUNDLE_CONTAINER = 'writegate-ca-bundle'
/** Every container name the injector reserves: no one else's container, exec or debug target. */
export const WRITEGATE_CONTAINERS: ReadonlySet<string> = new Set([
  PROXY_CONTAINER,
  INIT_CONTAINER,
  CA_BUNDLE_CONTAINER,
])
/** Keys of the interception CA's Secret (as `writegate ca init` names its files). */
export const CA_CERT_KEY = 'ca.crt'
export const CA_KEY_KEY = 'ca.key'
/** Keys of the proxy Secret named by writegate.io/api-key-secret. */
export const API_KEY_KEY = 'api-key'
export const REDIS_URL_KEY = 'redis-url'
/** Optional key of the same Secret: `cluster` when `redis-url` is a seed node of a Redis Cluster. */
export const REDIS_MODE_KEY = 'redis-mode'

export const VOLUMES = {
  routes: 'writegate-routes',
  proxySecret: 'writegate-proxy-secret',
  tmp: 'writegate-tmp',
  tlsCa: 'writegate-tls-ca',
  caCert: 'writegate-ca-cert',
  caBundle: 'writegate-ca-bundle',
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
    tlsPort: number
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
    // HTTPS through the proxy, which intercepts enrolled hosts with a CA the runtimes now trust.
    ...(req.tlsCaSecret
      ? [
          { name: 'HTTPS_PROXY', value: proxy },
          { name: 'https_proxy', value: proxy },
          ...['SSL_CERT_FILE', 'REQUESTS_CA_BUNDLE', 'CURL_CA_BUNDLE', 'GIT_SSL_CAINFO', 'AWS_CA_BUNDLE'].map(
            (name) => ({ name, value: CA_BUNDLE_FILE }),
          ),
          // Node adds these to its own roots, so the CA alone.
          { name: 'NODE_EXTRA_CA_CERTS', value: `${CA_CERT_DIR}/${CA_CERT_KEY}` },
        ]
      : []),
  ]
}

/** Agent-side volumes the injector mounts into every agent container (the CA certificate and bundle). */
export function agentMounts(req: InjectionRequest): VolumeMount[] {
  if (!req.tlsCaSecret) return []
  return [
    { name: VOLUMES.caCert, mountPath: CA_CERT_DIR, readOnly: true },
    { name: VOLUMES.caBundle, mountPath: CA_BUNDLE_DIR, readOnly: true },
  ]
}

/** Names of the volumes agents may (and do) mount; every other writegate volume is the proxy's. */
export const AGENT_VOLUMES: readonly string[] = [VOLUMES.caCert, VOLUMES.caBundle]

/**
 * Writes the agents' CA bundle: the image's system CAs plus the interception CA, before any
 * agent starts. Unprivileged, nothing but `cat`.
 */
export function caBundleInitContainer(opts: SidecarOptions): Container {
  return {
    name: CA_BUNDLE_CONTAINER,
    image: opts.proxy.image,
    imagePullPolicy: opts.proxy.imagePullPolicy,
    command: [
      'sh',
      '-c',
      `cat /etc/ssl/certs/ca-certificates.crt ${CA_CERT_DIR}/${CA_CERT_KEY} > ${CA_BUNDLE_FILE}`,
    ],
    volumeMounts: [
      { name: VOLUMES.caCert, mountPath: CA_CERT_DIR, readOnly: true },
      { name: VOLUMES.caBundle, mountPath: CA_BUNDLE_DIR },
    ],
    resources: { requests: { cpu: '10m', memory: '16Mi' }, limits: { cpu: '100m', memory: '64Mi' } },
    securityContext: {
      runAsUser: 65534,
      runAsGroup: 65534,
      runAsNonRoot: true,
      readOnlyRootFilesystem: true,
      allowPrivilegeEscalation: false,
      capabilities: { drop: ['ALL'] },
      // The restricted Pod Security profile asks for one on every container (or the pod).
      seccompProfile: { type: 'RuntimeDefault' },
    },
  }
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
    ...(req.tlsCaSecret
      ? [
          {
            name: VOLUMES.tlsCa,
            secret: {
              secretName: req.tlsCaSecret,
              items: [
                { key: CA_CERT_KEY, path: CA_CERT_KEY },
                { key: CA_KEY_KEY, path: CA_KEY_KEY },
              ],
            },
          },
          // The same Secret, its certificate alone: the key is never projected where agents mount.
          {
            name: VOLUMES.caCert,
            secret: { secretName: req.tlsCaSecret, items: [{ key: CA_CERT_KEY, path: CA_CERT_KEY }] },
          },
          { name: VOLUMES.caBundle, emptyDir: {} },
        ]
      : []),
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
    ...(req.tlsCaSecret ? [{ name: VOLUMES.tlsCa, mountPath: TLS_CA_DIR, readOnly: true }] : []),
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
      ...(req.tlsCaSecret ? [{ name: 'wg-tls', containerPort: p.tlsPort, protocol: 'TCP' }] : []),
    ],
    env: [
      // Every interface, whatever the image's defaults: iptables redirects both families to the
      // proxy port, and the kubelet probes and Prometheus scrapes reach it on the pod's IP.
      { name: 'WRITEGATE_PROXY_HOST', value: '::' },
      { name: 'WRITEGATE_PROXY_PORT', value: String(p.port) },
      { name: 'WRITEGATE_METRICS_HOST', value: '::' },
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
      ...(req.passthrough.length > 0
        ? [{ name: 'WRITEGATE_PROXY_PASSTHROUGH', value: req.passthrough.join(',') }]
        : []),
      { name: 'WRITEGATE_PROXY_API_KEY_FILE', value: `${PROXY_SECRET_DIR}/${API_KEY_KEY}` },
      {
        name: 'WRITEGATE_REDIS_URL',
        valueFrom: { secretKeyRef: { name: req.proxySecret, key: REDIS_URL_KEY } },
      },
      // Travels with the URL it describes; absent, the proxy speaks to one Redis.
      {
        name: 'WRITEGATE_REDIS_MODE',
        valueFrom: { secretKeyRef: { name: req.proxySecret, key: REDIS_MODE_KEY, optional: true } },
      },
      { name: 'WRITEGATE_LOG_LEVEL', value: p.logLevel },
      ...(req.tlsCaSecret
        ? [
            { name: 'WRITEGATE_PROXY_TLS_CA_CERT_FILE', value: `${TLS_CA_DIR}/${CA_CERT_KEY}` },
            { name: 'WRITEGATE_PROXY_TLS_CA_KEY_FILE', value: `${TLS_CA_DIR}/${CA_KEY_KEY}` },
            { name: 'WRITEGATE_PROXY_TLS_PORT', value: String(p.tlsPort) },
          ]
        : []),
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
export function enforceInitContainer(opts: SidecarOptions, req: InjectionRequest): Container {
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
        tlsPort: req.tlsCaSecret ? opts.proxy.tlsPort : undefined,
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
