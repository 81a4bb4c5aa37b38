import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { parseSettings } from '../../src/config/load.js'
import type { AdmissionResponseBody } from '../../src/injector/admission-review.js'
import { injectorOptions } from '../../src/injector/injector-process.js'
import { applyJsonPatch, type JsonPatchOp } from '../../src/injector/jsonpatch.js'
import type { Pod } from '../../src/injector/kube-types.js'
import { answerReview } from '../../src/injector/review-handler.js'

const opts = injectorOptions(
  parseSettings({ injector: { proxy: { image: 'registry.example/writegate:1.2.3' } } }),
)

/** The enforce fixture, with an interception CA: all three of writegate's init containers. */
// biome-ignore lint/suspicious/noExplicitAny: fixtures are inspected loosely
function review(): any {
  const r = JSON.parse(readFileSync(join(import.meta.dirname, 'fixtures', 'review-enforce-pod.json'), 'utf8'))
  r.request.object.metadata.annotations['writegate.io/tls-ca-secret'] = 'writegate-ca'
  return r
}

function answer(pod: Pod) {
  const r = review()
  r.request.object = pod
  const body = answerReview(r, opts).body as AdmissionResponseBody
  const patch: JsonPatchOp[] = body.response.patch
    ? JSON.parse(Buffer.from(body.response.patch, 'base64').toString('utf8'))
    : []
  return { allowed: body.response.allowed, message: body.response.status?.message, patch }
}

const ORDER = ['writegate-ca-bundle', 'writegate-init', 'writegate-proxy', 'fetch-model']

// Found in review: the missing ones were put at 0, 1…, ahead of one the pod already had, and the
// re-review (reinvocationPolicy IfNeeded) then refused the pod for the order the injector made.
t.test("a pod that has some of writegate's init containers gets the rest in their places", async (t) => {
  const fresh = review().request.object as Pod
  const first = answer(fresh)
  t.ok(first.allowed)
  const injected = applyJsonPatch(fresh, first.patch) as Pod
  t.same(
    injected.spec.initContainers?.map((c) => c.name),
    ORDER,
  )
  const ours = new Map((injected.spec.initContainers ?? []).map((c) => [c.name, c]))

  for (const have of [
    ['writegate-ca-bundle'],
    ['writegate-init'],
    ['writegate-proxy'],
    ['writegate-ca-bundle', 'writegate-proxy'],
    ['writegate-init', 'writegate-proxy'],
  ]) {
    const pod = review().request.object as Pod
    pod.spec.initContainers = [
      ...have.map((n) => structuredClone(ours.get(n)!)),
      ...(pod.spec.initContainers ?? []),
    ]
    const a = answer(pod)
    t.ok(a.allowed, `${have.join(', ')}: ${a.message ?? ''}`)
    const patched = applyJsonPatch(pod, a.patch) as Pod
    t.same(
      patched.spec.initContainers?.map((c) => c.name),
      ORDER,
      `with ${have.join(', ')}: in order`,
    )
    const again = answer(patched)
    t.ok(again.allowed, `with ${have.join(', ')}: the re-review admits it (${again.message ?? ''})`)
    t.same(again.patch, [], `with ${have.join(', ')}: the re-review changes nothing`)
  }
})
