import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { parseSettings } from '../../src/config/load.js'
import type { AdmissionResponseBody } from '../../src/injector/admission-review.js'
import { injectorOptions } from '../../src/injector/injector-process.js'
import { applyJsonPatch, type JsonPatchOp } from '../../src/injector/jsonpatch.js'
import type { EphemeralContainer, Pod } from '../../src/injector/kube-types.js'
import { answerReview } from '../../src/injector/review-handler.js'

const fixtures = join(import.meta.dirname, 'fixtures')
// biome-ignore lint/suspicious/noExplicitAny: fixtures are inspected loosely
const fixture = (name: string): any => JSON.parse(readFileSync(join(fixtures, name), 'utf8'))
const opts = injectorOptions(
  parseSettings({ injector: { proxy: { image: 'registry.example/writegate:1.2.3' } } }),
)

/** The pod as the injector left it when it was created (from a CREATE fixture). */
function injected(name: string): Pod {
  const review = fixture(name)
  const body = answerReview(review, opts).body as AdmissionResponseBody
  const patch = JSON.parse(Buffer.from(body.response.patch ?? '', 'base64').toString('utf8')) as JsonPatchOp[]
  return applyJsonPatch(review.request.object as Pod, patch)
}

/** An UPDATE review of `before` becoming what `change` makes of a copy of it. */
function update(before: Pod, change: (pod: Pod) => void, subResource?: string) {
  const after = structuredClone(before)
  change(after)
  if (JSON.stringify(after) === JSON.stringify(before)) throw new Error('the change changed nothing')
  return answerReview(
    {
      apiVersion: 'admission.k8s.io/v1',
      kind: 'AdmissionReview',
      request: {
        uid: 'uid-update',
        kind: { group: '', version: 'v1', kind: 'Pod' },
        resource: { group: '', version: 'v1', resource: 'pods' },
        ...(subResource ? { subResource } : {}),
        namespace: 'agents',
        name: 'billing-agent',
        operation: 'UPDATE',
        object: after,
        oldObject: before,
      },
    },
    opts,
  )
}

const allowed = (r: ReturnType<typeof update>) => (r.body as AdmissionResponseBody).response.allowed
const messageOf = (r: ReturnType<typeof update>) => (r.body as AdmissionResponseBody).response.status?.message

const debug = (container: Partial<EphemeralContainer>) => (pod: Pod) => {
  pod.spec.ephemeralContainers = [
    ...(pod.spec.ephemeralContainers ?? []),
    { name: 'debugger-x7', image: 'busybox:1.36', ...container },
  ]
}
const SAFE = { runAsUser: 1000, allowPrivilegeEscalation: false }

t.test('a change to an injected pod that leaves the gate as it was passes', async (t) => {
  const pod = injected('review-enforce-pod.json')
  const changes: [string, (p: Pod) => void][] = [
    ['a label', (p) => Object.assign(p.metadata?.labels ?? {}, { tier: 'gold' })],
    ['an annotation', (p) => Object.assign(p.metadata?.annotations ?? {}, { note: 'x' })],
    [
      "an agent's image",
      (p) => Object.assign(p.spec.containers[0] ?? {}, { image: 'registry.example/tool-runner:1.0.4' }),
    ],
    ['a debug container as a named user, no escalation', debug({ securityContext: SAFE })],
    ['a debug container beside the agent', debug({ securityContext: SAFE, targetContainerName: 'agent' })],
    [
      // kubectl debug strips the pod's labels first (--keep-labels=false): the guard does not hang on them.
      'the labels removed, writegate.io/proxy with them',
      (p) => {
        if (p.metadata) p.metadata.labels = {}
      },
    ],
    [
      'the agent resized',
      (p) => Object.assign(p.spec.containers[0] ?? {}, { resources: { limits: { memory: '1Gi' } } }),
    ],
  ]
  for (const [what, change] of changes) {
    const sub = what.startsWith('a debug')
      ? 'ephemeralcontainers'
      : what.endsWith('resized')
        ? 'resize'
        : undefined
    const r = update(pod, change, sub)
    t.ok(allowed(r), what)
    t.equal(r.summary.outcome, 'reviewed', `${what}: reviewed`)
    t.equal((r.body as AdmissionResponseBody).response.patch, undefined, 'never patched')
  }
})

t.test("writegate's containers cannot be changed", async (t) => {
  const pod = injected('review-enforce-pod.json')
  const proxyAt = (p: Pod) => (p.spec.initContainers ?? []).findIndex((c) => c.name === 'writegate-proxy')
  const initAt = (p: Pod) => (p.spec.initContainers ?? []).findIndex((c) => c.name === 'writegate-init')
  t.ok(proxyAt(pod) >= 0 && initAt(pod) >= 0, 'injected as a native sidecar, with the enforce rules')
  const cases: [string, (p: Pod) => void, RegExp][] = [
    [
      "the proxy's image swapped",
      (p) => Object.assign(p.spec.initContainers?.[proxyAt(p)] ?? {}, { image: 'evil.example/nogate:1' }),
      /^container writegate-proxy was injected by writegate and cannot be changed/,
    ],
    [
      "the rules' image swapped",
      (p) => Object.assign(p.spec.initContainers?.[initAt(p)] ?? {}, { image: 'busybox:1.36' }),
      /^container writegate-init was injected by writegate/,
    ],
    [
      'the proxy resized (pods/resize)',
      (p) =>
        Object.assign(p.spec.initContainers?.[proxyAt(p)] ?? {}, {
          resources: { requests: { cpu: '1m', memory: '1Mi' }, limits: { cpu: '1m', memory: '1Mi' } },
        }),
      /^container writegate-proxy was injected by writegate and cannot be changed/,
    ],
  ]
  for (const [what, change, message] of cases) {
    const r = update(pod, change, what.includes('resize') ? 'resize' : undefined)
    t.notOk(allowed(r), what)
    t.match(messageOf(r), message, what)
    t.equal(r.summary.outcome, 'rejected')
  }
})

t.test('a debug container cannot do what the pod’s own containers may not', async (t) => {
  const enforced = injected('review-enforce-pod.json')
  const cases: [string, Partial<EphemeralContainer>, RegExp][] = [
    [
      "as the proxy's UID",
      { securityContext: { ...SAFE, runAsUser: 1337 } },
      /runs as UID 1337, the writegate proxy's: under writegate\.io\/enforce/,
    ],
    ['as root', { securityContext: { ...SAFE, runAsUser: 0 } }, /runs as root/],
    [
      'as whatever its image says',
      { securityContext: { allowPrivilegeEscalation: false } },
      /sets no runAsUser/,
    ],
    ['able to escalate', { securityContext: { runAsUser: 1000 } }, /may gain privileges/],
    ['privileged', { securityContext: { ...SAFE, privileged: true } }, /is privileged/],
    [
      "joined to the proxy's processes",
      { securityContext: SAFE, targetContainerName: 'writegate-proxy' },
      /targets writegate-proxy: it would share the proxy's processes/,
    ],
    [
      "mounting the proxy's Secret",
      { securityContext: SAFE, volumeMounts: [{ name: 'writegate-proxy-secret', mountPath: '/x' }] },
      /mounts writegate-proxy-secret, which is reserved for the writegate proxy/,
    ],
    [
      'under a name of writegate’s',
      { name: 'writegate-init', securityContext: SAFE },
      /has a name reserved for writegate/,
    ],
    [
      'joined to the rules container',
      { securityContext: SAFE, targetContainerName: 'writegate-init' },
      /targets writegate-init/,
    ],
    [
      'adding NET_ADMIN (which would flush the rules, were it ever effective)',
      { securityContext: { ...SAFE, capabilities: { add: ['NET_ADMIN'] } } },
      /adds capability NET_ADMIN/,
    ],
    [
      "reading the proxy's own Secret by env",
      {
        securityContext: SAFE,
        env: [{ name: 'R', valueFrom: { secretKeyRef: { name: 'writegate-proxy', key: 'redis-url' } } }],
      },
      /reads Secret writegate-proxy, which only the writegate proxy may hold/,
    ],
  ]
  for (const [what, container, message] of cases) {
    const r = update(enforced, debug(container), 'ephemeralcontainers')
    t.notOk(allowed(r), what)
    t.match(messageOf(r), /^ephemeral container \S+ /, what)
    t.match(messageOf(r), message, what)
  }

  // The Secrets are read off the proxy as injected: the credential Secrets, by env too.
  const credentialed = injected('review-annotated-pod.json')
  const r = update(
    credentialed,
    debug({ envFrom: [{ secretRef: { name: 'billing-api-token' } }] }),
    'ephemeralcontainers',
  )
  t.notOk(allowed(r))
  t.match(messageOf(r), /reads Secret billing-api-token, which only the writegate proxy may hold/)
  // A named user for the whole pod serves a debug container that names none (kubectl debug
  // --profile=restricted sets no runAsUser).
  const podUser = structuredClone(enforced)
  podUser.spec.securityContext = { runAsUser: 1000 }
  t.ok(
    allowed(
      update(podUser, debug({ securityContext: { allowPrivilegeEscalation: false } }), 'ephemeralcontainers'),
    ),
    "the pod's runAsUser counts",
  )
  // A debug container that was already there is not judged again (it cannot be changed).
  const withOne = structuredClone(enforced)
  withOne.spec.ephemeralContainers = [
    { name: 'old-root', image: 'busybox:1.36', securityContext: { runAsUser: 0 } },
  ]
  t.ok(
    allowed(update(withOne, debug({ securityContext: SAFE }), 'ephemeralcontainers')),
    'only the added one',
  )
})

t.test('without enforce, root matters only where the pod shares processes', async (t) => {
  const plain = injected('review-annotated-pod.json')
  t.ok(
    allowed(update(plain, debug({ securityContext: { runAsUser: 0 } }), 'ephemeralcontainers')),
    'not enforced',
  )
  for (const field of ['shareProcessNamespace', 'hostPID'] as const) {
    const shared = structuredClone(plain)
    shared.spec[field] = true
    const r = update(shared, debug({ securityContext: { runAsUser: 0 } }), 'ephemeralcontainers')
    t.notOk(allowed(r), field)
    t.match(
      messageOf(r),
      /runs as root: the pod shares process namespaces \(shareProcessNamespace or hostPID\), so as UID 1337 it could read the proxy's files/,
    )
  }
})

t.test('no exec or attach into writegate’s containers; an agent’s is the agent’s business', async (t) => {
  const connect = (kind: string, object: Record<string, unknown>) =>
    answerReview(
      {
        apiVersion: 'admission.k8s.io/v1',
        kind: 'AdmissionReview',
        request: {
          uid: 'uid-exec',
          kind: { group: '', version: 'v1', kind },
          resource: { group: '', version: 'v1', resource: 'pods' },
          subResource: kind === 'PodExecOptions' ? 'exec' : 'attach',
          namespace: 'agents',
          name: 'billing-agent',
          operation: 'CONNECT',
          object: { apiVersion: 'v1', kind, ...object },
        },
      },
      opts,
    )
  for (const kind of ['PodExecOptions', 'PodAttachOptions'])
    for (const container of ['writegate-proxy', 'writegate-init', 'writegate-ca-bundle']) {
      const r = connect(kind, { container, command: ['sh'], stdin: true, tty: true })
      t.notOk(allowed(r), `${kind} into ${container}`)
      t.match(
        messageOf(r),
        new RegExp(`^container ${container} is writegate's: a shell there would run as the proxy`),
      )
      t.equal(r.summary.outcome, 'rejected')
    }
  t.ok(allowed(connect('PodExecOptions', { container: 'agent', command: ['sh'] })), "the agent's container")
  t.ok(allowed(connect('PodExecOptions', { command: ['sh'] })), 'no container named: the only regular one')
  t.notOk(allowed(connect('PodExecOptions', { container: 7 })), 'an unreadable one fails closed')
})

t.test('pods writegate did not inject, and pods it cannot read', async (t) => {
  const review = fixture('review-pod-update.json')
  const r = answerReview(review, opts)
  t.ok((r.body as AdmissionResponseBody).response.allowed)
  t.equal(r.summary.outcome, 'ignored', 'not injected: nothing to guard')

  const unreadable = structuredClone(review)
  unreadable.request.oldObject = { spec: { containers: [] } }
  const refused = answerReview(unreadable, opts)
  t.notOk((refused.body as AdmissionResponseBody).response.allowed, 'fails closed')
  t.match(
    (refused.body as AdmissionResponseBody).response.status?.message,
    /^writegate cannot read this pod: spec\.containers/,
  )
})

// Found in review: a pod whose annotations name a decoy Secret for its proxy left the default one unprotected.
t.test(
  "an ephemeral container cannot read the installation's proxy Secret, whatever this pod's proxy names",
  async (t) => {
    const review = fixture('review-annotated-pod.json')
    review.request.object.metadata.annotations['writegate.io/api-key-secret'] = 'decoy'
    const body = answerReview(review, opts).body as AdmissionResponseBody
    const patch = JSON.parse(
      Buffer.from(body.response.patch ?? '', 'base64').toString('utf8'),
    ) as JsonPatchOp[]
    const pod = applyJsonPatch(review.request.object as Pod, patch)
    const r = update(
      pod,
      debug({ securityContext: SAFE, envFrom: [{ secretRef: { name: 'writegate-proxy' } }] }),
      'ephemeralcontainers',
    )
    t.notOk(allowed(r))
    t.match(messageOf(r), /reads Secret writegate-proxy, which only the writegate proxy may hold/)
  },
)
