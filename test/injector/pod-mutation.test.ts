import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { parseSettings } from '../../src/config/load.js'
import type { AdmissionResponseBody } from '../../src/injector/admission-review.js'
import { injectorOptions } from '../../src/injector/injector-process.js'
import { applyJsonPatch, type JsonPatchOp } from '../../src/injector/jsonpatch.js'
import type { Container, Pod } from '../../src/injector/kube-types.js'
import { mutatePod } from '../../src/injector/pod-mutation.js'
import { answerReview } from '../../src/injector/review-handler.js'

const fixtures = join(import.meta.dirname, 'fixtures')
// biome-ignore lint/suspicious/noExplicitAny: fixtures are inspected loosely
const fixture = (name: string): any => JSON.parse(readFileSync(join(fixtures, name), 'utf8'))
const opts = injectorOptions(
  parseSettings({ injector: { proxy: { image: 'registry.example/writegate:1.2.3' } } }),
)

function patchOf(body: unknown): JsonPatchOp[] {
  const r = (body as AdmissionResponseBody).response
  if (!r.patch) return []
  t.equal(r.patchType, 'JSONPatch')
  return JSON.parse(Buffer.from(r.patch, 'base64').toString('utf8')) as JsonPatchOp[]
}

const PROXY_ENV_FOR_BILLING = [
  { name: 'HTTP_PROXY', value: 'http://127.0.0.1:15001' },
  { name: 'http_proxy', value: 'http://127.0.0.1:15001' },
  { name: 'NO_PROXY', value: '127.0.0.1,localhost,::1' },
  { name: 'no_proxy', value: '127.0.0.1,localhost,::1' },
  { name: 'BILLING_API_URL', value: 'http://127.0.0.1:15001/sys_billing' },
  { name: 'GITHUB_API_URL', value: 'http://127.0.0.1:15001/sys_github' },
]

const PROXY_CONTAINER_FOR_BILLING = {
  name: 'writegate-proxy',
  image: 'registry.example/writegate:1.2.3',
  imagePullPolicy: 'IfNotPresent',
  args: ['proxy'],
  ports: [
    { name: 'wg-proxy', containerPort: 15001, protocol: 'TCP' },
    { name: 'wg-metrics', containerPort: 9464, protocol: 'TCP' },
  ],
  env: [
    { name: 'WRITEGATE_PROXY_HOST', value: '::' },
    { name: 'WRITEGATE_PROXY_PORT', value: '15001' },
    { name: 'WRITEGATE_METRICS_HOST', value: '::' },
    { name: 'WRITEGATE_METRICS_PORT', value: '9464' },
    { name: 'WRITEGATE_ROUTES_FILE', value: '/etc/writegate/routes/systems.yaml' },
    { name: 'WRITEGATE_CREDENTIALS_ALLOW_FILES', value: '/var/run/writegate/credentials' },
    { name: 'WRITEGATE_PROXY_API_KEY_FILE', value: '/var/run/writegate/proxy/api-key' },
    {
      name: 'WRITEGATE_REDIS_URL',
      valueFrom: { secretKeyRef: { name: 'billing-agent-writegate', key: 'redis-url' } },
    },
    {
      name: 'WRITEGATE_REDIS_MODE',
      valueFrom: { secretKeyRef: { name: 'billing-agent-writegate', key: 'redis-mode', optional: true } },
    },
    { name: 'WRITEGATE_LOG_LEVEL', value: 'info' },
  ],
  envFrom: [{ secretRef: { name: 'billing-api-token' } }, { secretRef: { name: 'github-app-key' } }],
  volumeMounts: [
    { name: 'writegate-routes', mountPath: '/etc/writegate/routes', readOnly: true },
    { name: 'writegate-proxy-secret', mountPath: '/var/run/writegate/proxy', readOnly: true },
    {
      name: 'writegate-credential-0',
      mountPath: '/var/run/writegate/credentials/billing-api-token',
      readOnly: true,
    },
    {
      name: 'writegate-credential-1',
      mountPath: '/var/run/writegate/credentials/github-app-key',
      readOnly: true,
    },
    { name: 'writegate-tmp', mountPath: '/tmp' },
  ],
  resources: { requests: { cpu: '50m', memory: '64Mi' }, limits: { cpu: '1', memory: '256Mi' } },
  securityContext: {
    runAsUser: 1337,
    runAsGroup: 1337,
    runAsNonRoot: true,
    readOnlyRootFilesystem: true,
    allowPrivilegeEscalation: false,
    capabilities: { drop: ['ALL'] },
    seccompProfile: { type: 'RuntimeDefault' },
  },
  livenessProbe: { httpGet: { path: '/healthz', port: 15001 }, periodSeconds: 10, failureThreshold: 3 },
  readinessProbe: { httpGet: { path: '/readyz', port: 15001 }, periodSeconds: 5, failureThreshold: 2 },
  startupProbe: { httpGet: { path: '/readyz', port: 15001 }, periodSeconds: 1, failureThreshold: 120 },
  restartPolicy: 'Always',
}

t.test('an annotated pod gets exactly this JSON Patch', async (t) => {
  const review = fixture('review-annotated-pod.json')
  const answer = answerReview(review, opts)
  t.equal(answer.status, 200)
  const body = answer.body as AdmissionResponseBody
  t.equal(body.apiVersion, 'admission.k8s.io/v1')
  t.equal(body.kind, 'AdmissionReview')
  t.equal(body.response.uid, review.request.uid, 'answers the review it was asked')
  t.equal(body.response.allowed, true)
  t.same(patchOf(body), [
    { op: 'add', path: '/metadata/labels/writegate.io~1proxy', value: 'injected' },
    {
      op: 'add',
      path: '/spec/volumes/-',
      value: {
        name: 'writegate-routes',
        configMap: { name: 'billing-routes', items: [{ key: 'systems.yaml', path: 'systems.yaml' }] },
      },
    },
    {
      op: 'add',
      path: '/spec/volumes/-',
      value: {
        name: 'writegate-proxy-secret',
        secret: { secretName: 'billing-agent-writegate', items: [{ key: 'api-key', path: 'api-key' }] },
      },
    },
    {
      op: 'add',
      path: '/spec/volumes/-',
      value: { name: 'writegate-credential-0', secret: { secretName: 'billing-api-token' } },
    },
    {
      op: 'add',
      path: '/spec/volumes/-',
      value: { name: 'writegate-credential-1', secret: { secretName: 'github-app-key' } },
    },
    { op: 'add', path: '/spec/volumes/-', value: { name: 'writegate-tmp', emptyDir: {} } },
    { op: 'add', path: '/spec/initContainers', value: [PROXY_CONTAINER_FOR_BILLING] },
    // The agent's own HTTP_PROXY (a corporate proxy) is replaced in place; the rest is appended.
    { op: 'replace', path: '/spec/containers/0/env/1', value: PROXY_ENV_FOR_BILLING[0] },
    ...PROXY_ENV_FOR_BILLING.slice(1).map((value) => ({
      op: 'add',
      path: '/spec/containers/0/env/-',
      value,
    })),
    { op: 'add', path: '/spec/containers/1/env', value: PROXY_ENV_FOR_BILLING },
  ])
  t.same(answer.summary, {
    uid: review.request.uid,
    namespace: 'agents',
    pod: 'billing-agent-6d8f7c9b5-',
    outcome: 'injected',
    ops: 14,
  })
})

t.test('the injected pod: agents keep their env, and only the proxy holds its secrets', async (t) => {
  const review = fixture('review-annotated-pod.json')
  const pod = applyJsonPatch(review.request.object as Pod, patchOf(answerReview(review, opts).body))
  const agent = pod.spec.containers[0] as Container
  t.same(
    agent.env?.map((e) => e.name),
    ['LOG_LEVEL', 'HTTP_PROXY', 'http_proxy', 'NO_PROXY', 'no_proxy', 'BILLING_API_URL', 'GITHUB_API_URL'],
  )
  t.equal(agent.env?.find((e) => e.name === 'LOG_LEVEL')?.value, 'debug', 'untouched')

  const proxySecrets = new Set(['billing-agent-writegate', 'billing-api-token', 'github-app-key'])
  const proxyVolumes = new Set(
    (pod.spec.volumes ?? [])
      .filter(
        (v) => (v.secret && proxySecrets.has(v.secret.secretName)) || v.configMap?.name === 'billing-routes',
      )
      .map((v) => v.name),
  )
  t.equal(proxyVolumes.size, 4, 'routes, API key and two credential volumes')
  for (const c of [...pod.spec.containers, ...(pod.spec.initContainers ?? [])]) {
    if (c.name === 'writegate-proxy') continue
    t.notOk(
      (c.volumeMounts ?? []).some((m) => proxyVolumes.has(m.name)),
      `${c.name} mounts none of the proxy's volumes`,
    )
    t.notOk(
      (c.envFrom ?? []).some((f) => f.secretRef && proxySecrets.has(f.secretRef.name)),
      `${c.name} has no envFrom of the proxy's secrets`,
    )
    t.notOk(
      (c.env ?? []).some((e) => e.valueFrom !== undefined || /^WRITEGATE_/.test(e.name)),
      `${c.name} gets no secret-backed or proxy variables`,
    )
  }
  const proxy = pod.spec.initContainers?.find((c) => c.name === 'writegate-proxy')
  t.same(proxy?.volumeMounts?.map((m) => m.name).sort(), [...proxyVolumes, 'writegate-tmp'].sort())
})

t.test('idempotent: a pod that was injected gets an empty patch', async (t) => {
  for (const name of ['review-annotated-pod.json', 'review-enforce-pod.json']) {
    const review = fixture(name)
    const once = applyJsonPatch(review.request.object, patchOf(answerReview(review, opts).body))
    const again = answerReview({ ...review, request: { ...review.request, object: once } }, opts)
    t.equal((again.body as AdmissionResponseBody).response.allowed, true, name)
    t.same(patchOf(again.body), [], `${name}: nothing more to do`)
    t.equal(again.summary.outcome, 'unchanged')
  }
  // As the API server sends it back on reinvocation: with its defaults filled in.
  const injected = fixture('review-injected-pod.json')
  const r = answerReview(injected, opts)
  t.equal((r.body as AdmissionResponseBody).response.allowed, true)
  t.equal((r.body as AdmissionResponseBody).response.patch, undefined, 'no patch at all')
})

t.test("an injected pod is known whatever the order of its containers' keys", async (t) => {
  // The API server writes objects in Go struct order, not the injector's.
  const reversed = (v: unknown): unknown =>
    Array.isArray(v)
      ? v.map(reversed)
      : v && typeof v === 'object'
        ? Object.fromEntries(
            Object.entries(v)
              .reverse()
              .map(([k, x]) => [k, reversed(x)]),
          )
        : v
  const review = fixture('review-injected-pod.json')
  const spec = review.request.object.spec
  for (const list of [spec.containers, spec.initContainers ?? []])
    list.forEach((c: Container, i: number) => {
      if (c.name === 'writegate-proxy') list[i] = reversed(c)
    })
  const r = answerReview(review, opts)
  t.equal((r.body as AdmissionResponseBody).response.allowed, true)
  t.equal((r.body as AdmissionResponseBody).response.patch, undefined, 'nothing to do')
})

t.test('a reserved-name container that differs from the injected one in anything is refused', async (t) => {
  const edits: [string, (c: Record<string, unknown>) => void][] = [
    [
      'a postStart hook (it would run as UID 1337)',
      (c) => (c.lifecycle = { postStart: { exec: { command: ['sh', '-c', 'curl evil'] } } }),
    ],
    ['an exec startup probe', (c) => (c.startupProbe = { exec: { command: ['node', '-e', '1'] } })],
    ['another working directory', (c) => (c.workingDir = '/tmp')],
    [
      'one more variable',
      (c) => (c.env as unknown[]).push({ name: 'WRITEGATE_PROXY_PASSTHROUGH', value: '*' }),
    ],
  ]
  for (const [name, edit] of edits) {
    const review = fixture('review-injected-pod.json')
    const spec = review.request.object.spec
    const proxy = [...spec.containers, ...(spec.initContainers ?? [])].find(
      (c: Container) => c.name === 'writegate-proxy',
    )
    edit(proxy)
    const body = answerReview(review, opts).body as AdmissionResponseBody
    t.equal(body.response.allowed, false, name)
    t.match(
      body.response.status?.message,
      /container writegate-proxy has a name reserved for writegate/,
      name,
    )
  }
})

t.test('a container added after injection (by another webhook) still gets the proxy variables', async (t) => {
  const review = fixture('review-annotated-pod.json')
  const pod = applyJsonPatch(review.request.object as Pod, patchOf(answerReview(review, opts).body))
  pod.spec.containers.push({
    name: 'late',
    image: 'registry.example/late:1',
    env: [{ name: 'A', value: '1' }],
  })
  const m = mutatePod(pod, opts)
  t.equal(m.outcome, 'injected')
  t.same(
    m.outcome === 'injected' ? m.patch : [],
    PROXY_ENV_FOR_BILLING.map((value) => ({ op: 'add', path: '/spec/containers/2/env/-', value })),
  )
})

t.test('an un-annotated pod passes untouched', async (t) => {
  for (const name of ['review-unannotated-pod.json', 'review-pod-update.json']) {
    const review = fixture(name)
    const answer = answerReview(review, opts)
    t.equal(answer.status, 200)
    t.same(answer.body, {
      apiVersion: 'admission.k8s.io/v1',
      kind: 'AdmissionReview',
      response: { uid: review.request.uid, allowed: true },
    })
  }
  const off = fixture('review-annotated-pod.json')
  off.request.object.metadata.annotations['writegate.io/inject'] = 'false'
  t.equal(answerReview(off, opts).summary.outcome, 'skipped')
})

// Its Redis URL writes every tenant's decision state: a pod that is not gated may not hold it.
t.test("an un-annotated pod may not hold the proxy's Secret", async (t) => {
  const cases: [string, (spec: Pod['spec']) => void, RegExp][] = [
    [
      'a volume',
      (s) => {
        s.volumes = [...(s.volumes ?? []), { name: 'loot', secret: { secretName: 'writegate-proxy' } }]
      },
      /volume loot exposes Secret writegate-proxy/,
    ],
    [
      'envFrom',
      (s) => {
        s.containers[0]!.envFrom = [{ secretRef: { name: 'writegate-proxy' } }]
      },
      /reads Secret writegate-proxy, which only the writegate proxy may hold/,
    ],
  ]
  for (const [what, change, message] of cases) {
    const review = fixture('review-unannotated-pod.json')
    change(review.request.object.spec)
    const answer = answerReview(review, opts).body as AdmissionResponseBody
    t.equal(answer.response.allowed, false, what)
    t.match(answer.response.status?.message, message, what)
  }
  const other = fixture('review-unannotated-pod.json')
  other.request.object.spec.volumes = [{ name: 'creds', secret: { secretName: 'billing-api-token' } }]
  t.equal(answerReview(other, opts).summary.outcome, 'skipped', 'any other Secret is its own business')
})

t.test('the native-sidecar switch puts the proxy among the containers instead', async (t) => {
  const classic = injectorOptions(parseSettings({ injector: { proxy: { nativeSidecar: false } } }))
  const review = fixture('review-annotated-pod.json')
  const patch = patchOf(answerReview(review, classic).body)
  t.notOk(
    patch.some((op) => op.path.startsWith('/spec/initContainers')),
    'no init container',
  )
  const last = patch.at(-1) as JsonPatchOp & { value: Container }
  t.equal(last.path, '/spec/containers/-')
  t.equal(last.value.name, 'writegate-proxy')
  t.equal(last.value.restartPolicy, undefined)
  t.equal(last.value.startupProbe, undefined)
  const pod = applyJsonPatch(review.request.object as Pod, patch)
  t.same(mutatePod(pod, classic), {
    outcome: 'injected',
    patch: [],
    request: (mutatePod(pod, classic) as { request: unknown }).request,
  })
})

t.test('pods that cannot be gated safely are refused with a message', async (t) => {
  const cases: [string, (o: Pod) => void, RegExp][] = [
    [
      'an unreadable inject flag',
      (o) => {
        o.metadata!.annotations!['writegate.io/inject'] = 'yes'
      },
      /^annotation writegate\.io\/inject must be "true" or "false", got "yes"$/,
    ],
    [
      // Found in review: naming a decoy Secret for its proxy, a pod handed its agent the real one.
      "the installation's proxy Secret, the pod's proxy naming another",
      (o) => {
        o.metadata!.annotations!['writegate.io/api-key-secret'] = 'decoy'
        o.spec.containers[0]!.envFrom = [{ secretRef: { name: 'writegate-proxy' } }]
      },
      /container agent reads Secret writegate-proxy, which only the writegate proxy may hold/,
    ],
    [
      "the installation's proxy Secret as a credential Secret",
      (o) => {
        o.metadata!.annotations!['writegate.io/api-key-secret'] = 'decoy'
        o.metadata!.annotations!['writegate.io/credential-secrets'] = 'billing-api-token,writegate-proxy'
      },
      /Secret writegate-proxy is writegate's own/,
    ],
    [
      // Found in review: it started with no proxy and no rules, believing itself enforced.
      'enforce without inject',
      (o) => {
        delete o.metadata!.annotations!['writegate.io/inject']
        o.metadata!.annotations!['writegate.io/enforce'] = 'true'
      },
      /writegate\.io\/enforce: "true" needs writegate\.io\/inject: "true"/,
    ],
    [
      'a malformed base-url-env',
      (o) => {
        o.metadata!.annotations!['writegate.io/base-url-env'] = 'BILLING_API_URL'
      },
      /expected ENV_NAME=sys_id/,
    ],
    [
      'a base-url-env that takes over HTTP_PROXY',
      (o) => {
        o.metadata!.annotations!['writegate.io/base-url-env'] = 'HTTP_PROXY=sys_billing'
      },
      /HTTP_PROXY is set by the injector itself/,
    ],
    [
      'a bad Secret name',
      (o) => {
        o.metadata!.annotations!['writegate.io/credential-secrets'] = 'Billing_Token'
      },
      /"Billing_Token" is not a Secret name/,
    ],
    [
      'hostNetwork',
      (o) => {
        o.spec.hostNetwork = true
      },
      /hostNetwork/,
    ],
    [
      'a port the proxy needs',
      (o) => {
        o.spec.containers[0]!.ports = [{ containerPort: 15001 }]
      },
      /container agent uses port 15001/,
    ],
    [
      'an agent reading the proxy key',
      (o) => {
        o.spec.containers[1]!.envFrom = [{ secretRef: { name: 'billing-agent-writegate' } }]
      },
      /container tool-runner reads Secret billing-agent-writegate/,
    ],
    [
      'an agent given an upstream credential',
      (o) => {
        o.spec.containers[0]!.env!.push({
          name: 'TOKEN',
          valueFrom: { secretKeyRef: { name: 'github-app-key', key: 'k' } },
        })
      },
      /container agent reads Secret github-app-key/,
    ],
    [
      'a volume of an upstream credential',
      (o) => {
        o.spec.volumes!.push({ name: 'creds', secret: { secretName: 'billing-api-token' } })
      },
      /volume creds exposes Secret billing-api-token/,
    ],
    [
      "an agent mounting the proxy's volume",
      (o) => {
        o.spec.volumes!.push({ name: 'writegate-routes', configMap: { name: 'billing-routes' } })
        o.spec.containers[0]!.volumeMounts!.push({ name: 'writegate-routes', mountPath: '/x' })
      },
      /container agent mounts writegate-routes/,
    ],
    [
      'a reserved volume name for something else',
      (o) => {
        o.spec.volumes!.push({ name: 'writegate-tmp', configMap: { name: 'other' } })
      },
      /volume name writegate-tmp is reserved/,
    ],
    [
      // Taken as injected already, it went ungated: any image, as UID 1337, reading the proxy's Secret.
      "the pod's own container named writegate-proxy",
      (o) => {
        o.metadata!.annotations!['writegate.io/enforce'] = 'true'
        o.spec.containers.push({
          name: 'writegate-proxy',
          image: 'evil.example/agent:1',
          securityContext: { runAsUser: 1337 },
          envFrom: [{ secretRef: { name: 'billing-agent-writegate' } }],
        })
      },
      /container writegate-proxy has a name reserved for writegate but is not the container it injects/,
    ],
    [
      "the pod's own (empty) writegate-init: no iptables rules",
      (o) => {
        o.metadata!.annotations!['writegate.io/enforce'] = 'true'
        o.spec.initContainers = [{ name: 'writegate-init', image: 'busybox', command: ['true'] }]
      },
      /container writegate-init has a name reserved for writegate/,
    ],
    [
      "the proxy's own Secret named as a credential Secret",
      (o) => {
        o.metadata!.annotations!['writegate.io/credential-secrets'] = 'billing-agent-writegate'
      },
      /Secret billing-agent-writegate is writegate's own/,
    ],
    [
      "enforce with an agent running as the proxy's UID",
      (o) => {
        o.metadata!.annotations!['writegate.io/enforce'] = 'true'
        o.spec.containers[0]!.securityContext = { runAsUser: 1337 }
      },
      /runs as UID 1337/,
    ],
    // Enforce holds only if no agent container can become UID 1337 (the rules let it through).
    ...(
      [
        ['with no runAsUser (the image decides: root, or 1337)', {}, /container agent sets no runAsUser/],
        [
          'as root (it can setuid to 1337)',
          { runAsUser: 0, allowPrivilegeEscalation: false },
          /runs as root/,
        ],
        [
          'free to escalate (a setuid binary gives root)',
          { runAsUser: 1000 },
          /may gain privileges \(set allowPrivilegeEscalation: false\)/,
        ],
        [
          'privileged',
          { runAsUser: 1000, allowPrivilegeEscalation: false, privileged: true },
          /is privileged/,
        ],
      ] as const
    ).map(([what, securityContext, pattern]): [string, (o: Pod) => void, RegExp] => [
      `enforce with an agent ${what}`,
      (o) => {
        o.metadata!.annotations!['writegate.io/enforce'] = 'true'
        o.spec.containers[0]!.securityContext = { ...securityContext }
      },
      pattern,
    ]),
    [
      "enforce with the proxy's UID set for the whole pod",
      (o) => {
        o.metadata!.annotations!['writegate.io/enforce'] = 'true'
        o.spec.securityContext = { runAsUser: 1337 }
        o.spec.containers[0]!.securityContext = { allowPrivilegeEscalation: false }
      },
      /container agent runs as UID 1337/,
    ],
    [
      // Not enforced, but one process namespace: root (or UID 1337) reads the proxy's files in /proc.
      'one process namespace with an agent that may run as root',
      (o) => {
        o.spec.shareProcessNamespace = true
      },
      /^container agent sets no runAsUser .*: the pod shares process namespaces \(shareProcessNamespace or hostPID\), so as UID 1337 it could read the proxy's files$/,
    ],
    [
      "the node's process namespace with an agent that may run as root",
      (o) => {
        o.spec.hostPID = true
      },
      /^container agent sets no runAsUser .*: the pod shares process namespaces/,
    ],
    [
      'enforce with an agent adding SYS_PTRACE',
      (o) => {
        o.metadata!.annotations!['writegate.io/enforce'] = 'true'
        o.spec.containers[0]!.securityContext = {
          runAsUser: 1000,
          allowPrivilegeEscalation: false,
          capabilities: { add: ['SYS_PTRACE'] },
        }
      },
      /container agent adds capability SYS_PTRACE/,
    ],
  ]
  for (const [name, edit, pattern] of cases) {
    const review = fixture('review-annotated-pod.json')
    edit(review.request.object)
    const answer = answerReview(review, opts)
    const body = answer.body as AdmissionResponseBody
    t.equal(answer.status, 200, name)
    t.equal(body.response.uid, review.request.uid)
    t.equal(body.response.allowed, false, `${name} is refused`)
    t.equal(body.response.status?.code, 400)
    t.match(body.response.status?.message, pattern, name)
    t.equal(body.response.patch, undefined)
    t.equal(answer.summary.outcome, 'rejected')
  }
})

t.test(
  'one process namespace is injected when every other container runs as a named user, no escalation',
  async (t) => {
    const review = fixture('review-annotated-pod.json')
    review.request.object.spec.shareProcessNamespace = true
    for (const c of review.request.object.spec.containers)
      c.securityContext = { runAsUser: 1000, allowPrivilegeEscalation: false }
    const answer = answerReview(review, opts)
    t.equal(answer.summary.outcome, 'injected')
  },
)

t.test('a malformed review is a 400 JSON error; an unreadable pod is refused', async (t) => {
  const bad = answerReview(fixture('review-malformed.json'), opts)
  t.equal(bad.status, 400)
  t.match(bad.body, { code: 'invalid_request', error: /^invalid AdmissionReview: apiVersion: / })
  t.ok(Array.isArray((bad.body as { issues: unknown[] }).issues))
  for (const junk of [
    null,
    42,
    'review',
    [],
    {},
    { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview' },
  ]) {
    const r = answerReview(junk, opts)
    t.equal(r.status, 400, JSON.stringify(junk))
    t.equal((r.body as { code: string }).code, 'invalid_request')
  }
  const noContainers = fixture('review-pod-without-containers.json')
  const r = answerReview(noContainers, opts)
  t.equal(r.status, 200)
  t.match((r.body as AdmissionResponseBody).response, {
    uid: noContainers.request.uid,
    allowed: false,
    status: { code: 400, message: /^writegate cannot read this pod: spec\.containers: / },
  })
})

t.test('enforce puts the iptables rules and the proxy before the pod’s own init containers', async (t) => {
  const review = fixture('review-enforce-pod.json')
  const patch = patchOf(answerReview(review, opts).body)
  const inits = patch
    .filter((op) => op.path.startsWith('/spec/initContainers/'))
    .map((op) => op.value as Container)
  t.same(
    patch.filter((op) => op.path.startsWith('/spec/initContainers/')).map((op) => op.path),
    ['/spec/initContainers/0', '/spec/initContainers/1'],
  )
  t.same(
    inits.map((c) => c.name),
    ['writegate-init', 'writegate-proxy'],
    'rules first, then the proxy',
  )
  // Run after the rules, the pod's own init container (fetch-model) has no ungated moment.
  const injected = applyJsonPatch(review.request.object, patch) as Pod
  t.same(
    injected.spec.initContainers?.map((c) => c.name),
    ['writegate-init', 'writegate-proxy', 'fetch-model'],
  )
  const init = inits[0] as Container
  t.same(init.securityContext, {
    runAsUser: 0,
    runAsGroup: 0,
    runAsNonRoot: false,
    readOnlyRootFilesystem: false,
    allowPrivilegeEscalation: false,
    capabilities: { add: ['NET_ADMIN', 'NET_RAW'], drop: ['ALL'] },
  })
  t.equal(init.image, 'registry.example/writegate:1.2.3', 'the proxy image ships iptables')
  t.equal(init.command?.[0], 'sh')
  t.match(init.command?.[2], /-A WRITEGATE_OUTPUT -m owner --uid-owner 1337 -j RETURN/)
  t.match(init.command?.[2], /-A WRITEGATE_OUTPUT -p tcp -j REDIRECT --to-ports 15001/)
  // Defaults: the proxy Secret from settings; no routes ConfigMap (deprecated) unless one is named.
  const volumes = patch.filter((op) => op.path === '/spec/volumes/-').map((op) => op.value)
  t.match(volumes, [
    { name: 'writegate-proxy-secret', secret: { secretName: 'writegate-proxy' } },
    { name: 'writegate-tmp', emptyDir: {} },
  ])
})

t.test(
  'without a routes ConfigMap the proxy gets no file; credential-env allows its variables',
  async (t) => {
    const review = fixture('review-annotated-pod.json')
    const a = review.request.object.metadata.annotations
    delete a['writegate.io/routes']
    a['writegate.io/credential-env'] = 'BILLING_API_TOKEN, GITHUB_APP_KEY'
    const ops = patchOf(answerReview(review, opts).body)
    const volumes = ops
      .filter((o) => o.path === '/spec/volumes/-')
      .map((o) => (o.value as { name: string }).name)
    t.notOk(volumes.includes('writegate-routes'), 'no routes volume')
    const initContainers = ops.find((o) => o.path === '/spec/initContainers')
    t.ok(initContainers, 'the proxy is injected as a native sidecar')
    const proxy = (
      (initContainers?.value ?? []) as {
        env: { name: string; value?: string }[]
        volumeMounts: { name: string }[]
      }[]
    )[0]
    t.notOk(proxy?.env.some((e) => e.name === 'WRITEGATE_ROUTES_FILE'))
    t.notOk(proxy?.volumeMounts.some((m) => m.name === 'writegate-routes'))
    t.same(
      proxy?.env.filter((e) => e.name.startsWith('WRITEGATE_CREDENTIALS_')),
      [
        { name: 'WRITEGATE_CREDENTIALS_ALLOW_FILES', value: '/var/run/writegate/credentials' },
        { name: 'WRITEGATE_CREDENTIALS_ALLOW_ENV', value: 'BILLING_API_TOKEN,GITHUB_APP_KEY' },
      ],
    )
    for (const bad of ['WRITEGATE_REDIS_URL', 'not a name']) {
      a['writegate.io/credential-env'] = bad
      const refused = answerReview(review, opts).body as AdmissionResponseBody
      t.equal(refused.response.allowed, false, bad)
      t.match(refused.response.status?.message, /writegate\.io\/credential-env/)
    }
  },
)

t.test('writegate.io/passthrough: the proxy is told which hosts it lets through opaque', async (t) => {
  const review = fixture('review-annotated-pod.json')
  const a = review.request.object.metadata.annotations
  const proxyEnv = () => {
    const pod = applyJsonPatch(review.request.object as Pod, patchOf(answerReview(review, opts).body))
    const proxy = [...(pod.spec.initContainers ?? []), ...pod.spec.containers].find(
      (c) => c.name === 'writegate-proxy',
    )
    return proxy?.env?.find((e) => e.name === 'WRITEGATE_PROXY_PASSTHROUGH')
  }
  t.equal(proxyEnv(), undefined, 'none without the annotation')
  a['writegate.io/passthrough'] = 'Telemetry.example.com, registry.npmjs.org:443,telemetry.example.com'
  t.same(proxyEnv(), {
    name: 'WRITEGATE_PROXY_PASSTHROUGH',
    value: 'telemetry.example.com,registry.npmjs.org:443',
  })
  for (const bad of ['https://example.com', 'host name', 'a,b/c']) {
    a['writegate.io/passthrough'] = bad
    const refused = answerReview(review, opts).body as AdmissionResponseBody
    t.equal(refused.response.allowed, false, bad)
    t.match(refused.response.status?.message, /writegate\.io\/passthrough/)
  }
})

t.test(
  'writegate.io/tls-ca-secret: the proxy gets the CA and its key; agents the certificate alone, a bundle and the variables runtimes read',
  async (t) => {
    const review = fixture('review-annotated-pod.json')
    review.request.object.metadata.annotations['writegate.io/tls-ca-secret'] = 'tenant-ca'
    const pod = applyJsonPatch(review.request.object as Pod, patchOf(answerReview(review, opts).body))
    const volumes = Object.fromEntries((pod.spec.volumes ?? []).map((v) => [v.name, v]))
    t.same(
      volumes['writegate-tls-ca']?.secret?.items?.map((i: { key: string }) => i.key),
      ['ca.crt', 'ca.key'],
    )
    t.same(
      volumes['writegate-ca-cert']?.secret?.items?.map((i: { key: string }) => i.key),
      ['ca.crt'],
      'the key is never projected where agents mount',
    )
    const proxy = [...(pod.spec.initContainers ?? []), ...pod.spec.containers].find(
      (c) => c.name === 'writegate-proxy',
    )
    const proxyEnv = Object.fromEntries((proxy?.env ?? []).map((e) => [e.name, e.value]))
    t.equal(proxyEnv.WRITEGATE_PROXY_TLS_CA_CERT_FILE, '/var/run/writegate/tls-ca/ca.crt')
    t.equal(proxyEnv.WRITEGATE_PROXY_TLS_CA_KEY_FILE, '/var/run/writegate/tls-ca/ca.key')
    t.ok(proxy?.volumeMounts?.some((m) => m.name === 'writegate-tls-ca'))
    const bundle = pod.spec.initContainers?.find((c) => c.name === 'writegate-ca-bundle')
    t.match(
      bundle?.command?.[2],
      /cat \/etc\/ssl\/certs\/ca-certificates\.crt \/var\/run\/writegate\/ca\/ca\.crt > /,
    )
    t.equal(bundle?.securityContext?.runAsNonRoot, true)
    t.same(
      bundle?.securityContext?.seccompProfile,
      { type: 'RuntimeDefault' },
      'admitted under the restricted Pod Security profile',
    )
    for (const c of pod.spec.containers.filter((c) => c.name !== 'writegate-proxy')) {
      const env = Object.fromEntries((c.env ?? []).map((e) => [e.name, e.value]))
      for (const name of [
        'SSL_CERT_FILE',
        'REQUESTS_CA_BUNDLE',
        'CURL_CA_BUNDLE',
        'GIT_SSL_CAINFO',
        'AWS_CA_BUNDLE',
      ])
        t.equal(env[name], '/var/run/writegate/ca-bundle/ca-bundle.crt', `${c.name}: ${name}`)
      t.equal(env.NODE_EXTRA_CA_CERTS, '/var/run/writegate/ca/ca.crt')
      t.equal(env.HTTPS_PROXY, 'http://127.0.0.1:15001')
      t.same(
        (c.volumeMounts ?? [])
          .filter((m) => m.name.startsWith('writegate-'))
          .map((m) => m.name)
          .sort(),
        ['writegate-ca-bundle', 'writegate-ca-cert'],
        `${c.name}: the certificate and bundle, never the key`,
      )
    }
    const again = answerReview({ ...review, request: { ...review.request, object: pod } }, opts)
    t.same(patchOf(again.body), [], 'injecting an injected pod changes nothing')

    const leaky = fixture('review-annotated-pod.json')
    leaky.request.object.metadata.annotations['writegate.io/tls-ca-secret'] = 'tenant-ca'
    leaky.request.object.spec.containers[0].envFrom = [{ secretRef: { name: 'tenant-ca' } }]
    const refused = answerReview(leaky, opts).body as AdmissionResponseBody
    t.equal(refused.response.allowed, false)
    t.match(refused.response.status?.message, /tenant-ca/)

    // Found in review: the agents' CA volume declared by the pod itself, under writegate's name,
    // with all the Secret's keys (the CA's private key among them) or the key remapped.
    for (const [what, secret] of [
      ['every key', { secretName: 'tenant-ca' }],
      [
        "the key under the certificate's name",
        { secretName: 'tenant-ca', items: [{ key: 'ca.key', path: 'ca.crt' }] },
      ],
    ] as const) {
      const own = fixture('review-annotated-pod.json')
      own.request.object.metadata.annotations['writegate.io/tls-ca-secret'] = 'tenant-ca'
      own.request.object.spec.volumes = [
        ...(own.request.object.spec.volumes ?? []),
        { name: 'writegate-ca-cert', secret },
      ]
      own.request.object.spec.containers[0].volumeMounts = [
        ...(own.request.object.spec.containers[0].volumeMounts ?? []),
        { name: 'writegate-ca-cert', mountPath: '/loot' },
      ]
      const answer = answerReview(own, opts).body as AdmissionResponseBody
      t.equal(answer.response.allowed, false, what)
      t.match(answer.response.status?.message, /volume name writegate-ca-cert is reserved/, what)
    }
  },
)

t.test(
  'enforce with an interception CA: outbound 443 goes to the TLS port, the rest to the proxy port',
  async (t) => {
    const review = fixture('review-enforce-pod.json')
    review.request.object.metadata.annotations['writegate.io/tls-ca-secret'] = 'tenant-ca'
    const pod = applyJsonPatch(review.request.object as Pod, patchOf(answerReview(review, opts).body))
    const init = pod.spec.initContainers?.find((c) => c.name === 'writegate-init')
    const script = init?.command?.[2] ?? ''
    t.match(
      script,
      /-A WRITEGATE_OUTPUT -p tcp --dport 443 -j REDIRECT --to-ports 15443\n-A WRITEGATE_OUTPUT -p tcp -j REDIRECT --to-ports 15001/,
    )
    const proxy = pod.spec.initContainers?.find((c) => c.name === 'writegate-proxy')
    t.equal(proxy?.env?.find((e) => e.name === 'WRITEGATE_PROXY_TLS_PORT')?.value, '15443')
    t.ok(proxy?.ports?.some((p) => p.containerPort === 15443))
    const plain = fixture('review-enforce-pod.json')
    const plainPod = applyJsonPatch(plain.request.object as Pod, patchOf(answerReview(plain, opts).body))
    t.notMatch(
      plainPod.spec.initContainers?.find((c) => c.name === 'writegate-init')?.command?.[2] ?? '',
      /--dport 443/,
      'without a CA, 443 goes to the plain port as before',
    )
  },
)

// Found in review: ways out of an enforced pod that the rules themselves could not see.
t.test("writegate's own init containers, copied into a pod, must come first and in order", async (t) => {
  const review = fixture('review-enforce-pod.json')
  const injected = applyJsonPatch(review.request.object, patchOf(answerReview(review, opts).body)) as Pod
  const ours = (injected.spec.initContainers ?? []).filter((c) => c.name.startsWith('writegate-'))
  t.same(
    ours.map((c) => c.name),
    ['writegate-init', 'writegate-proxy'],
  )
  const tunnel: Container = {
    name: 'tunnel',
    image: 'evil.example/tunnel:1',
    restartPolicy: 'Always',
    securityContext: { runAsUser: 1000, allowPrivilegeEscalation: false },
  }
  for (const [name, inits] of [
    ['a native sidecar of its own before the rules', [tunnel, ...ours]],
    ['the proxy before the rules', [ours[1], ours[0], tunnel]],
  ] as [string, Container[]][]) {
    const again = fixture('review-enforce-pod.json')
    again.request.object.spec.initContainers = inits
    const body = answerReview(again, opts).body as AdmissionResponseBody
    t.equal(body.response.allowed, false, `${name}: refused`)
    t.match(body.response.status?.message, /init containers .* must come first/)
  }
  const inOrder = fixture('review-enforce-pod.json')
  inOrder.request.object.spec.initContainers = [...ours, tunnel]
  t.equal(
    (answerReview(inOrder, opts).body as AdmissionResponseBody).response.allowed,
    true,
    'first and in order: allowed',
  )
})

t.test('an enforced pod cannot name its own nameservers (DNS to them passes the rules)', async (t) => {
  const review = fixture('review-enforce-pod.json')
  review.request.object.spec.dnsPolicy = 'None'
  review.request.object.spec.dnsConfig = { nameservers: ['203.0.113.5'] }
  const body = answerReview(review, opts).body as AdmissionResponseBody
  t.equal(body.response.allowed, false)
  t.match(body.response.status?.message, /cannot name its own nameservers/)
  const plain = fixture('review-annotated-pod.json')
  plain.request.object.spec.dnsConfig = { nameservers: ['203.0.113.5'] }
  t.equal(
    (answerReview(plain, opts).body as AdmissionResponseBody).response.allowed,
    true,
    'not enforced: there are no rules to pass',
  )
})
