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
  ]
  for (const [what, change] of changes) {
    const r = update(pod, change, what.startsWith('a debug') ? 'ephemeralcontainers' : undefined)
    t.ok(allowed(r), what)
    t.equal(r.summary.outcome, 'reviewed', `${what}: reviewed`)
    t.equal((r.body as AdmissionResponseBody).response.patch, undefined, 'never patched')
  }
})

t.test("writegate's containers and its label cannot be changed", async (t) => {
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
      'the injected label removed',
      (p) => {
        delete p.metadata?.labels?.['writegate.io/proxy']
      },
      /^label writegate\.io\/proxy marks the pod as injected by writegate and cannot be changed or removed$/,
    ],
  ]
  for (const [what, change, message] of cases) {
    const r = update(pod, change)
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

t.test('without enforce, root matters only where the pod shares one process namespace', async (t) => {
  const plain = injected('review-annotated-pod.json')
  t.ok(
    allowed(update(plain, debug({ securityContext: { runAsUser: 0 } }), 'ephemeralcontainers')),
    'not enforced',
  )
  const shared = structuredClone(plain)
  shared.spec.shareProcessNamespace = true
  const r = update(shared, debug({ securityContext: { runAsUser: 0 } }), 'ephemeralcontainers')
  t.notOk(allowed(r))
  t.match(
    messageOf(r),
    /runs as root: the pod shares one process namespace, so as UID 1337 it could read the proxy's files/,
  )
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
