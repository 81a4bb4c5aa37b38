import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { parseSettings } from '../../src/config/load.js'
import type { AdmissionResponseBody } from '../../src/injector/admission-review.js'
import { injectorOptions } from '../../src/injector/injector-process.js'
import type { Pod } from '../../src/injector/kube-types.js'
import { answerReview } from '../../src/injector/review-handler.js'

const opts = injectorOptions(parseSettings({}))
// biome-ignore lint/suspicious/noExplicitAny: fixtures are inspected loosely
const fixture = (name: string): any =>
  JSON.parse(readFileSync(join(import.meta.dirname, 'fixtures', name), 'utf8'))

/** 100,000 nested arrays, as the webhook server parses them off the wire (iteratively, no overflow there). */
const deep = () => JSON.parse(`${'['.repeat(100_000)}${']'.repeat(100_000)}`)

// Found in review: copying or canonicalising such a container overflowed the stack, and the API
// server got a 500 instead of an answer.
t.test('a pod nested too deeply is refused with an answer, not a 500', async (t) => {
  const create = fixture('review-annotated-pod.json')
  create.request.object.spec.containers.push({ name: 'writegate-proxy', image: 'x', args: deep() })
  // An update of an injected pod: writegate's containers are compared whole, before and after.
  const updateOf = (change: (before: Pod, after: Pod) => void) => {
    const review = fixture('review-pod-update.json')
    const injected = fixture('review-injected-pod.json').request.object as Pod
    review.request.oldObject = structuredClone(injected)
    review.request.object = structuredClone(injected)
    change(review.request.oldObject, review.request.object)
    return review
  }
  const proxyOf = (pod: Pod) =>
    [...(pod.spec.initContainers ?? []), ...pod.spec.containers].find((c) => c.name === 'writegate-proxy')!
  const update = updateOf((_, after) => {
    proxyOf(after).args = deep()
  })
  const oldDeep = updateOf((before) => {
    proxyOf(before).args = deep()
  })
  for (const [name, review] of [
    ['CREATE, in a writegate-named container', create],
    ['UPDATE, in the new pod', update],
    ['UPDATE, in the old pod', oldDeep],
  ] as const) {
    const answer = answerReview(review, opts)
    t.equal(answer.status, 200, name)
    const body = answer.body as AdmissionResponseBody
    t.equal(body.response.uid, review.request.uid)
    t.equal(body.response.allowed, false)
    t.equal(body.response.status?.message, 'writegate cannot read this pod: nested too deeply', name)
  }
})

t.test('a pod of ordinary depth is still read', async (t) => {
  const review = fixture('review-annotated-pod.json')
  review.request.object.spec.containers[0].args = JSON.parse(`${'['.repeat(20)}${']'.repeat(20)}`)
  const body = answerReview(review, opts).body as AdmissionResponseBody
  t.equal(body.response.allowed, true)
})

// Found in review: zod reported every bad element of a list, with its path and input: a 3 MB
// review of 1.5 million took 1.5 GB and 9 s, and 300,000 bad env entries overflowed the stack.
t.test('a pod whose lists hold many bad elements is refused at the first', async (t) => {
  const wide = fixture('review-annotated-pod.json')
  wide.request.object.spec.containers[0].env = Array.from({ length: 300_000 }, () => 1)
  const wideMap = fixture('review-annotated-pod.json')
  wideMap.request.object.metadata.labels = Object.fromEntries(
    Array.from({ length: 300_000 }, (_, i) => [`l${i}`, i]),
  )
  const many = fixture('review-annotated-pod.json')
  many.request.object.spec.containers = Array.from({ length: 300_000 }, () => 1)
  for (const [name, review, where] of [
    ['env', wide, 'spec.containers.0.env.0'],
    ['labels', wideMap, 'metadata.labels.l0'],
    ['containers', many, 'spec.containers.0'],
  ] as const) {
    const answer = answerReview(review, opts)
    t.equal(answer.status, 200, name)
    const body = answer.body as AdmissionResponseBody
    t.equal(body.response.allowed, false, name)
    t.match(
      body.response.status?.message,
      new RegExp(`^writegate cannot read this pod: ${where.replaceAll('.', '\\.')}: `),
      name,
    )
  }
})
