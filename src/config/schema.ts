import { isIP } from 'node:net'
import { z } from 'zod'
import { VERSION } from '../version.js'

/**
 * A number, or a string of one (environment overrides are strings). Not z.coerce: that turns
 * an empty YAML value, '' or false into 0, so `port:` left blank would bind a random port.
 */
const num = (refine: (n: z.ZodNumber) => z.ZodNumber) =>
  z.preprocess(
    (v) => (typeof v === 'string' && /^\s*-?\d+(\.\d+)?\s*$/.test(v) ? Number(v) : v),
    refine(z.number()),
  )

const port = num((n) => n.int().min(0).max(65535))

/** Where every listener binds unless told otherwise: nothing is reachable from the network by default. */
export const LOOPBACK = '127.0.0.1'

/** `loopback`, an IP address or a CIDR; handed to proxy-addr as fastify's trustProxy. */
const trustEntry = z.string().refine(
  (s) => {
    if (['loopback', 'linklocal', 'uniquelocal'].includes(s)) return true
    const [addr, bits, ...rest] = s.split('/')
    if (rest.length > 0 || !addr || isIP(addr) === 0) return false
    if (bits === undefined) return true
    // proxy-addr refuses /0 (trust everyone) and anything but plain digits.
    const n = Number(bits)
    return /^\d+$/.test(bits) && n >= 1 && n <= (isIP(addr) === 4 ? 32 : 128)
  },
  { message: 'expected loopback, linklocal, uniquelocal, an IP address or a CIDR (prefix 1 or more)' },
)

/**
 * An allowEnv entry may not reach writegate's own settings (the database URL, the Redis
 * password): not `WRITEGATE_X`, nor a prefix that covers them (`*`, `WRITE*`), but for the
 * `WRITEGATE_CREDENTIAL_` family, which exists for secrets to inject.
 */
function mayNameSecret(entry: string): boolean {
  const name = entry.replace(/^ten_[A-Za-z0-9]+:/, '')
  const own = 'WRITEGATE_'
  if (name.endsWith('*')) {
    const prefix = name.slice(0, -1)
    return !own.startsWith(prefix) && (!prefix.startsWith(own) || prefix.startsWith('WRITEGATE_CREDENTIAL_'))
  }
  return !name.startsWith(own) || name.startsWith('WRITEGATE_CREDENTIAL_')
}

const logLevel = z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'])

/**
 * The shapes of the injector's settings, as regular expressions the chart's values schema
 * (scripts/gen-values-schema.ts) is generated from too: helm refuses what the injector would
 * refuse at start-up, instead of installing it to crash-loop. No flags, no lookaround: Helm
 * checks them with Go's regexp.
 */
export const INJECTOR_PATTERNS = {
  /** Kubernetes quantities such as `100m`, `0.5`, `128Mi`, `1G`. */
  quantity: '^[0-9]+(\\.[0-9]+)?(m|k|M|G|T|Ki|Mi|Gi|Ti)?$',
  /** A Kubernetes object name (RFC 1123 subdomain), at most 253 characters. */
  objectName: '^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$',
  /** An image reference is `<name>[:<tag>][@<digest>]`. */
  imageName: '[a-zA-Z0-9]+([._/:-][a-zA-Z0-9]+)*',
  imageTag: '[\\w][\\w.-]{0,127}',
  imageDigest: '@sha256:[a-fA-F0-9]{64}',
  routesKey: '^[-._a-zA-Z0-9]+$',
  noProxy: '^[A-Za-z0-9.*:/_-]+$',
} as const
export const OBJECT_NAME_MAX = 253

const quantity = z.string().regex(new RegExp(INJECTOR_PATTERNS.quantity), {
  message: 'expected a Kubernetes quantity such as 100m or 128Mi',
})
const resourceList = z.object({ cpu: quantity.optional(), memory: quantity.optional() }).strict()
const resources = z
  .object({ requests: resourceList.prefault({}), limits: resourceList.prefault({}) })
  .strict()
const { imageName, imageTag, imageDigest } = INJECTOR_PATTERNS
/** An image reference: [registry/]name[:tag][@digest]. */
const imageRef = z.string().regex(new RegExp(`^${imageName}(:${imageTag})?(${imageDigest})?$`), {
  message: 'expected an image reference such as registry.example/writegate:0.1.0',
})
const objectName = z.string().max(OBJECT_NAME_MAX).regex(new RegExp(INJECTOR_PATTERNS.objectName), {
  message: 'expected a Kubernetes object name (lowercase letters, digits, - and .)',
})
const cidr = z.string().refine(
  (s) => {
    const [addr, bits, ...rest] = s.split('/')
    // isIP takes a zone (fe80::1%eth0), which is no part of a range iptables reads.
    if (rest.length > 0 || !addr || addr.includes('%') || isIP(addr) === 0 || bits === undefined) return false
    const n = Number(bits)
    return /^\d+$/.test(bits) && n <= (isIP(addr) === 4 ? 32 : 128)
  },
  { message: 'expected a CIDR such as 10.0.0.0/8' },
)

/**
 * A shorter prefix takes most of the Internet out of the proxy's reach: enforcement off in all but
 * name. IPv6 is allocated in far larger blocks (2600::/8 is all of one registry's), so its floor
 * is a provider's allocation, /32; unique local addresses (fc00::/7, a cluster's own, as 10/8 is
 * IPv4's) may be excluded whole.
 */
export const MIN_EXCLUDED_PREFIX = { 4: 8, 6: 32, uniqueLocal: 7 } as const
const uniqueLocal = (address: string, bits: number) =>
  bits >= MIN_EXCLUDED_PREFIX.uniqueLocal &&
  (Number.parseInt(address.split(':')[0] || '0', 16) & 0xfe00) === 0xfc00
const tooWide = (s: string): boolean => {
  const [address = '', bits] = s.split('/')
  if (bits === undefined || !/^\d+$/.test(bits)) return false
  const family = isIP(address)
  if (family === 6 && uniqueLocal(address, Number(bits))) return false
  return family !== 0 && Number(bits) < MIN_EXCLUDED_PREFIX[family as 4 | 6]
}
const excludedCidr = cidr.refine((s) => !tooWide(s), {
  message:
    'a prefix shorter than /8 (IPv4) or /32 (IPv6) would let agents reach most addresses around the proxy',
})
const noProxyEntry = z
  .string()
  .regex(new RegExp(INJECTOR_PATTERNS.noProxy))
  .refine((x) => x !== '*' && !tooWide(x), {
    message:
      '* or a prefix shorter than /8 (IPv4) or /32 (IPv6) would have agents go around the proxy for most hosts',
  })

/** The ports one injected proxy listens on: two the same and it exits at start in every pod. */
const PROXY_PORTS = ['port', 'metricsPort', 'tlsPort'] as const

/** The Kubernetes admission webhook that injects gate-proxy beside annotated agent pods. */
const injectorSettings = z
  .object({
    /** Loopback by default, like every listener; the image and the chart set `::` for the API server to reach it. */
    host: z.string().min(1).default(LOOPBACK),
    port: port.default(8443),
    tls: z
      .object({
        certFile: z.string().min(1).default('/etc/writegate/injector-tls/tls.crt'),
        keyFile: z.string().min(1).default('/etc/writegate/injector-tls/tls.key'),
        /** How often the files are checked for a rotated certificate (cert-manager renews in place). */
        reloadSeconds: num((n) => n.int().min(1).max(86400)).default(60),
      })
      .strict()
      .prefault({}),
    /** Used when a pod does not name its own with writegate.io/routes or writegate.io/api-key-secret. */
    defaults: z
      .object({
        /** Deprecated: a routes ConfigMap for pods that name none; unset, a proxy gets no file (it serves its tenant's enrolled systems). */
        routesConfigMap: objectName.optional(),
        proxySecret: objectName.default('writegate-proxy'),
        /** The interception CA's Secret (ca.crt, ca.key) for pods that name none; unset, no HTTPS interception. */
        tlsCaSecret: objectName.optional(),
      })
      .strict()
      .prefault({}),
    proxy: z
      .object({
        image: imageRef.default(`writegate:${VERSION}`),
        imagePullPolicy: z.enum(['Always', 'IfNotPresent', 'Never']).default('IfNotPresent'),
        port: port.default(15001),
        metricsPort: port.default(9464),
        /** The proxy's TLS port (HTTPS interception, transparent mode) in pods with an interception CA. */
        tlsPort: port.default(15443),
        /** Key of the routes ConfigMap that holds the enrolled-systems YAML. */
        routesKey: z.string().regex(new RegExp(INJECTOR_PATTERNS.routesKey)).default('systems.yaml'),
        logLevel: logLevel.default('info'),
        /** Run the proxy as a native sidecar (an init container with restartPolicy Always, Kubernetes 1.29+): agents start only once it is ready, and Jobs still finish. */
        nativeSidecar: z.boolean().default(true),
        /** Hosts agents reach directly, besides loopback (NO_PROXY syntax). */
        noProxy: z.array(noProxyEntry).default([]),
        resources: resources.prefault({
          requests: { cpu: '50m', memory: '64Mi' },
          limits: { cpu: '1', memory: '256Mi' },
        }),
      })
      .strict()
      .superRefine((proxy, ctx) => {
        PROXY_PORTS.forEach((key, i) => {
          const earlier = PROXY_PORTS.slice(0, i).find((other) => proxy[other] === proxy[key])
          if (earlier)
            ctx.addIssue({
              code: 'custom',
              path: [key],
              message: `must differ from injector.proxy.${earlier} (both ${proxy[key]}): the injected proxy listens on each`,
            })
        })
      })
      .prefault({}),
    /** writegate.io/enforce: an init container redirects all outbound TCP to the proxy. */
    enforce: z
      .object({
        /** Needs iptables; unset means the proxy image (the writegate image ships iptables). */
        image: imageRef.optional(),
        /** Destinations that skip the redirect (the API server for a controller agent, say). */
        excludeOutboundCidrs: z.array(excludedCidr).default([]),
        excludeOutboundPorts: z.array(num((n) => n.int().min(1).max(65535))).default([]),
      })
      .strict()
      .prefault({}),
  })
  .strict()
  .prefault({})

export const settingsSchema = z
  .object({
    server: z
      .object({
        /**
         * Loopback by default: key issuance needs no credential, so a quick start must not offer
         * it to the network. The image and the chart listen on every interface explicitly.
         */
        host: z.string().min(1).default(LOOPBACK),
        port: port.default(8080),
        /** Client IPs are the socket address unless the peer is one of these (X-Forwarded-For is then honoured). */
        trustProxy: z.array(trustEntry).default([]),
        /** Where clients reach the API (links in badges and exports): an http(s) URL, never `javascript:`. */
        publicUrl: z.url({ protocol: /^https?$/, error: 'expected an http:// or https:// URL' }).optional(),
        /**
         * A request not answered in time gets 503 (a database that stopped answering would
         * otherwise hold it as long as the client waits). Routes that call an upstream get
         * `execute.deadlineMs` and more; exports and verification of the whole log an hour.
         */
        handlerTimeoutMs: num((n) => n.int().min(1000).max(3600000)).default(30000),
      })
      .strict()
      .prefault({}),
    proxy: z
      .object({
        port: port.default(15001),
        /**
         * Loopback by default. The injected sidecar listens on `::` (IPv4 too), where the
         * injector's iptables rules redirect both families and the kubelet probes it.
         */
        host: z.string().min(1).default(LOOPBACK),
        /**
         * Serve writes to clients that reach the proxy at a non-loopback address (another pod, by
         * this pod's IP). Off: they would act as the proxy's tenant, with its upstream
         * credentials; only /healthz and /readyz answer them (the kubelet's probes).
         */
        remoteClients: z.boolean().default(false),
        /** The route table: an enrolled-systems file (src/config/systems.ts). */
        routesFile: z.string().min(1).optional(),
        /** File holding the agent-scoped API key the proxy acts as. */
        apiKeyFile: z.string().min(1).optional(),
        /** The environment whose policy override applies to this proxy's decisions. */
        environment: z.enum(['dev', 'staging', 'prod']).optional(),
        /** Upstream response timeout. */
        upstreamTimeoutMs: num((n) => n.int().min(100).max(600000)).default(30000),
        /** A STEP_UP write is staged for approval with its body, up to this size. */
        maxStagedBodyBytes: num((n) => n.int().min(0).max(10485760)).default(1048576),
        /** An MCP or GraphQL request body is read whole to decide its calls, up to this size (larger: 413). */
        maxInspectedBodyBytes: num((n) => n.int().min(1024).max(10485760)).default(1048576),
        /** Hosts (`host` or `host:port`) a CONNECT tunnel may reach, opaque and ungated. */
        passthrough: z
          .array(z.string().regex(/^[A-Za-z0-9.-]+(:\d+)?$/, { message: 'expected host or host:port' }))
          .default([]),
        /**
         * TLS interception: with a name-constrained CA (`writegate ca init`), a CONNECT to an
         * enrolled https upstream is terminated by the proxy and every request in it gated.
         */
        tls: z
          .object({
            caCertFile: z.string().min(1).optional(),
            caKeyFile: z.string().min(1).optional(),
            /** Lifetime of a minted leaf certificate. */
            leafTtlSeconds: num((n) => n.int().min(300).max(604800)).default(3600),
            /** Leaf certificates kept (one per intercepted host). */
            leafCacheSize: num((n) => n.int().min(1).max(100000)).default(1000),
            /** A client that has not finished its TLS handshake by then is cut. */
            handshakeTimeoutMs: num((n) => n.int().min(100).max(120000)).default(10000),
            /**
             * Transparent mode: a TLS port (on proxy.host) where the ClientHello's SNI picks the
             * enrolled system; unset, none. Needs the CA files.
             */
            port: port.optional(),
            /**
             * Transparent mode: the port a connection whose SNI is on proxy.passthrough is
             * tunnelled to, opaque (the port agents' traffic was redirected from).
             */
            passthroughPort: num((n) => n.int().min(1).max(65535)).default(443),
          })
          .strict()
          .refine((t) => (t.caCertFile === undefined) === (t.caKeyFile === undefined), {
            message: 'set both caCertFile and caKeyFile, or neither',
          })
          .refine((t) => t.port === undefined || t.caCertFile !== undefined, {
            message: 'the TLS port needs the interception CA: set proxy.tls.caCertFile and caKeyFile',
            path: ['port'],
          })
          .prefault({}),
      })
      .strict()
      .prefault({}),
    metrics: z
      .object({
        port: port.default(9464),
        host: z.string().min(1).default(LOOPBACK),
      })
      .strict()
      .prefault({}),
    database: z
      .object({
        /** `postgres://…` for a server, `memory://` for in-memory PGlite; unset means PGlite under dataDir. */
        url: z
          .string()
          .refine((s) => s === 'memory://' || (/^postgres(ql)?:\/\//.test(s) && URL.canParse(s)), {
            message: 'expected a valid URL: postgres://…, postgresql://… or memory://',
          })
          .optional(),
        maxConnections: num((n) => n.int().min(1).max(200)).default(10),
      })
      .strict()
      .prefault({}),
    dataDir: z.string().min(1).default('./.writegate'),
    redis: z
      .object({
        /** Unset means single-process, in-memory hot state. */
        url: z
          .string()
          .refine((s) => /^rediss?:\/\//.test(s) && URL.canParse(s), {
            message: 'expected a valid URL: redis://… or rediss://…',
          })
          .optional(),
        keyPrefix: z
          .string()
          .regex(/^[A-Za-z0-9:_-]*$/)
          .default('wg:'),
        /** `cluster`: `url` is a seed node of a Redis Cluster (tenants' keys spread over its masters by hash tag). */
        mode: z.enum(['standalone', 'cluster']).default('standalone'),
      })
      .strict()
      .prefault({}),
    log: z
      .object({
        level: logLevel.default('info'),
      })
      .strict()
      .prefault({}),
    secrets: z
      .object({
        /** 32 random bytes (base64 or hex) from which token-signing and at-rest encryption keys are derived. */
        masterKeyFile: z.string().min(1).optional(),
      })
      .strict()
      .prefault({}),
    issuance: z
      .object({
        /** `proof` (default) requires proof for a second key of an email; `open` is the unsafe literal reading. */
        sameEmail: z.enum(['proof', 'open']).default('proof'),
        perIpPerHour: num((n) => n.int().min(1).max(100000)).default(10),
      })
      .strict()
      .prefault({}),
    quota: z
      .object({
        checksPerMonth: num((n) => n.int().min(1)).default(100),
      })
      .strict()
      .prefault({}),
    /**
     * Deprecated (one release): a systems file imported at start-up into the tenants it names,
     * as if applied with `writegate systems apply`. Systems are enrolled through /v1/systems.
     */
    systemsFile: z.string().min(1).optional(),
    systems: z
      .object({
        /**
         * Loopback, private and link-local upstreams (127.0.0.1, 10.0.0.0/8, 169.254.169.254…).
         * Unset: allowed only in the embedded default (no Redis), refused otherwise.
         */
        allowPrivateUpstreams: z.boolean().optional(),
      })
      .strict()
      .prefault({}),
    /**
     * Which secrets a system's credential reference may name in this process. Tenant admins
     * write the references, so they may only reach secrets set aside for injection.
     */
    credentials: z
      .object({
        /** Environment variables: `NAME` or `PREFIX*`, either optionally after `ten_…:` (that tenant only). */
        allowEnv: z
          .array(
            z.string().regex(/^(ten_[A-Za-z0-9]+:)?([A-Za-z_][A-Za-z0-9_]*\*?|\*)$/, {
              message: 'expected NAME, PREFIX* or ten_…:NAME',
            }),
          )
          .default([])
          .refine((l) => l.every(mayNameSecret), {
            message:
              "writegate's own settings (WRITEGATE_*) cannot be injected; name the secret's own variable (WRITEGATE_CREDENTIAL_* is allowed)",
          }),
        /** Directories whose files (symlinks resolved) may be named, optionally after `ten_…:`. */
        allowFiles: z
          .array(
            z.string().regex(/^(ten_[A-Za-z0-9]+:)?\/.*$/, {
              message: 'expected an absolute directory, optionally after ten_…:',
            }),
          )
          .default([]),
        /** How often a resolved credential is read again (a mounted Secret is rotated in place). */
        refreshSeconds: num((n) => n.int().min(1).max(86400)).default(30),
      })
      .strict()
      .prefault({}),
    tokens: z
      .object({
        /** Lifetime of ALLOW tokens and leases. */
        allowTtlSeconds: num((n) => n.int().min(5).max(3600)).default(60),
      })
      .strict()
      .prefault({}),
    sandbox: z
      .object({
        perIpPerMinute: num((n) => n.int().min(1).max(100000)).default(20),
      })
      .strict()
      .prefault({}),
    /** Upstream calls of /v1/execute and approved agent actions (one keep-alive pool per enrolled origin). */
    execute: z
      .object({
        connectTimeoutMs: num((n) => n.int().min(100).max(120000)).default(5000),
        /** Time to the upstream's response headers. */
        headersTimeoutMs: num((n) => n.int().min(100).max(600000)).default(30000),
        /** Longest gap between two chunks of the upstream's response body. */
        bodyTimeoutMs: num((n) => n.int().min(100).max(600000)).default(30000),
        /** A larger upstream response is cut off and reported as an upstream error. */
        maxResponseBytes: num((n) =>
          n
            .int()
            .min(1024)
            .max(64 * 1024 * 1024),
        ).default(8 * 1024 * 1024),
        connectionsPerOrigin: num((n) => n.int().min(1).max(1024)).default(32),
        /**
         * The whole upstream call, from connecting to the last byte of its answer: the timeouts
         * above bound each wait, not a trickle that never ends.
         */
        deadlineMs: num((n) => n.int().min(1000).max(3600000)).default(120000),
      })
      .strict()
      .prefault({}),
    /** Brute-force limits on TOTP and backup codes presented to approve agent actions. */
    approvals: z
      .object({
        /** Code checks per action in `actionWindowSeconds`: five wrong codes lock the action for a minute. */
        codeAttemptsPerAction: num((n) => n.int().min(1).max(1000)).default(5),
        actionWindowSeconds: num((n) => n.int().min(1).max(86400)).default(60),
        /** Code checks per tenant (all its actions) in `tenantWindowSeconds`. */
        codeAttemptsPerTenant: num((n) => n.int().min(1).max(100000)).default(30),
        tenantWindowSeconds: num((n) => n.int().min(1).max(86400)).default(600),
      })
      .strict()
      .prefault({}),
    portal: z
      .object({
        /** Serve the sponsor's portal at /portal on the control plane's port. */
        enabled: z.boolean().default(true),
        /** A session unused this long ends (idle expiry). */
        sessionIdleSeconds: num((n) => n.int().min(60).max(86400)).default(1800),
        /** A session ends this long after sign-in, however busy (absolute expiry). */
        sessionMaxSeconds: num((n) => n.int().min(300).max(604800)).default(43200),
        /** Sign-in attempts per client address in `signInWindowSeconds`. */
        signInAttemptsPerIp: num((n) => n.int().min(1).max(100000)).default(10),
        /** Sign-in attempts per tenant (every address) in `signInWindowSeconds`. */
        signInAttemptsPerTenant: num((n) => n.int().min(1).max(100000)).default(30),
        signInWindowSeconds: num((n) => n.int().min(1).max(86400)).default(600),
      })
      .strict()
      .prefault({}),
    hotStore: z
      .object({
        /** How often the reconciler compares snapshot versions with Postgres. */
        reconcileIntervalMs: num((n) => n.int().min(100).max(600000)).default(5000),
      })
      .strict()
      .prefault({}),
    injector: injectorSettings,
    audit: z
      .object({
        /** PEM PKCS#8 Ed25519 private key that signs checkpoints; never stored in Postgres. */
        signingKeyFile: z.string().min(1).optional(),
        /** Every tenant whose head moved gets a signed checkpoint this often. */
        checkpointIntervalSeconds: num((n) => n.int().min(1).max(86400)).default(60),
        /** `: keepalive` comments on receipt streams at least this often (the contract says 15 s at most). */
        streamKeepaliveSeconds: num((n) => n.int().min(1).max(15)).default(15),
      })
      .strict()
      .prefault({}),
    manifests: z
      .object({
        /** PEM (SPKI) or raw base64 Ed25519 public key of the scanner whose manifests may be imported. */
        scannerPublicKeyFile: z.string().min(1).optional(),
      })
      .strict()
      .prefault({}),
  })
  .strict()

export type Settings = z.infer<typeof settingsSchema>
