import { ERRORS } from '../core/errors.js'
import {
  type AdmissionRequest,
  type AdmissionResponseBody,
  admissionReviewSchema,
  allow,
  deny,
  type Issue,
  issuesOf,
  podConnectOptionsSchema,
  readPod,
} from './admission-review.js'
import { type InjectorOptions, mutatePod, writegateSecrets } from './pod-mutation.js'
import { reviewPodUpdate } from './pod-update-review.js'
import { WRITEGATE_CONTAINERS } from './proxy-sidecar.js'

/** What the log gets for one review: identifiers and the outcome, never the object itself. */
export interface ReviewSummary {
  uid?: string
  namespace?: string
  pod?: string
  outcome: 'injected' | 'unchanged' | 'skipped' | 'ignored' | 'reviewed' | 'rejected' | 'invalid'
  ops?: number
  message?: string
  dryRun?: boolean
}

export interface ReviewAnswer {
  status: number
  body: AdmissionResponseBody | { error: string; code: string; issues?: unknown }
  summary: ReviewSummary
}

/**
 * One admission review, from parsed JSON to the HTTP answer. A body that is not an
 * AdmissionReview has no uid to answer to, so it gets a 400 JSON error (the API server
 * then applies the webhook's failurePolicy). A review of a pod the injector cannot read
 * or gate safely is answered `allowed: false` with a message for `kubectl`.
 */
export function answerReview(body: unknown, opts: InjectorOptions): ReviewAnswer {
  const parsed = admissionReviewSchema.safeParse(body)
  if (!parsed.success) {
    const issues = issuesOf(parsed.error)
    const first = issues[0]
    return {
      status: 400,
      body: {
        error: `invalid AdmissionReview${first ? `: ${first.path || '(root)'}: ${first.message}` : ''}`,
        code: ERRORS.invalidRequest.code,
        issues,
      },
      summary: { outcome: 'invalid', ...(first ? { message: `${first.path}: ${first.message}` } : {}) },
    }
  }
  const req = parsed.data.request
  const base: Omit<ReviewSummary, 'outcome'> = {
    uid: req.uid,
    ...(req.namespace ? { namespace: req.namespace } : {}),
    ...(req.dryRun ? { dryRun: true } : {}),
  }
  if (req.kind.group === '' && req.operation === 'CONNECT' && CONNECT_KINDS.has(req.kind.kind))
    return answerConnect(req, base)
  if (req.kind.group !== '' || req.kind.kind !== 'Pod')
    return { status: 200, body: allow(req.uid), summary: { ...base, outcome: 'ignored' } }
  if (req.operation === 'UPDATE') return answerUpdate(req, base, writegateSecrets(opts.defaults))
  if (req.operation !== 'CREATE')
    return { status: 200, body: allow(req.uid), summary: { ...base, outcome: 'ignored' } }

  const pod = readPod(req.object)
  if (!pod.ok) {
    const message = cannotRead(pod.issues)
    return { status: 200, body: deny(req.uid, message), summary: { ...base, outcome: 'rejected', message } }
  }
  const meta = pod.pod.metadata
  const named = {
    ...base,
    ...(meta?.name || meta?.generateName ? { pod: meta.name || meta.generateName } : {}),
  }
  const m = mutatePod(pod.pod, opts)
  switch (m.outcome) {
    case 'skipped':
      return { status: 200, body: allow(req.uid), summary: { ...named, outcome: 'skipped' } }
    case 'rejected':
      return {
        status: 200,
        body: deny(req.uid, m.message),
        summary: { ...named, outcome: 'rejected', message: m.message },
      }
    case 'injected':
      return {
        status: 200,
        body: allow(req.uid, m.patch),
        summary: { ...named, outcome: m.patch.length > 0 ? 'injected' : 'unchanged', ops: m.patch.length },
      }
  }
}

/** Why a pod cannot be read, for `kubectl`: the first issue, with its place in the pod if it has one. */
function cannotRead(issues: Issue[]): string {
  const first = issues[0]
  if (!first) return 'writegate cannot read this pod'
  return `writegate cannot read this pod: ${first.path ? `${first.path}: ` : ''}${first.message}`
}

/**
 * A change to a running pod (the validating webhook: pods UPDATE, pods/ephemeralcontainers and
 * pods/resize).
 * Only refused or admitted, never patched. A pod the injector cannot read is refused: it cannot
 * tell whether the change takes the pod's writes around the gate.
 */
function answerUpdate(
  req: AdmissionRequest,
  base: Omit<ReviewSummary, 'outcome'>,
  writegates: ReadonlySet<string>,
): ReviewAnswer {
  const before = readPod(req.oldObject)
  const after = readPod(req.object)
  const named = { ...base, ...(req.name ? { pod: req.name } : {}) }
  if (!before.ok || !after.ok) {
    const message = cannotRead((before.ok ? [] : before.issues).concat(after.ok ? [] : after.issues))
    return { status: 200, body: deny(req.uid, message), summary: { ...named, outcome: 'rejected', message } }
  }
  const verdict = reviewPodUpdate(before.pod, after.pod, writegates)
  switch (verdict.outcome) {
    case 'ignored':
      return { status: 200, body: allow(req.uid), summary: { ...named, outcome: 'ignored' } }
    case 'allowed':
      return { status: 200, body: allow(req.uid), summary: { ...named, outcome: 'reviewed' } }
    case 'rejected':
      return {
        status: 200,
        body: deny(req.uid, verdict.message),
        summary: { ...named, outcome: 'rejected', message: verdict.message },
      }
  }
}

/** `kubectl exec`, `kubectl cp` and `kubectl attach` (pods/exec, pods/attach). */
const CONNECT_KINDS = new Set(['PodExecOptions', 'PodAttachOptions'])

/**
 * A shell in writegate's proxy runs as UID 1337, which the enforce rules let through, and
 * holds what the proxy holds: its API key, the upstream credentials. So no one execs into or
 * attaches to writegate's containers; an agent's container is the agent's business. (An exec
 * that names no container reaches the pod's only regular container, never a native sidecar.)
 */
function answerConnect(req: AdmissionRequest, base: Omit<ReviewSummary, 'outcome'>): ReviewAnswer {
  const named = { ...base, ...(req.name ? { pod: req.name } : {}) }
  const options = podConnectOptionsSchema.safeParse(req.object)
  if (!options.success) {
    const message = 'writegate cannot read which container this is for'
    return { status: 200, body: deny(req.uid, message), summary: { ...named, outcome: 'rejected', message } }
  }
  const container = options.data.container
  if (container !== undefined && WRITEGATE_CONTAINERS.has(container)) {
    const message = `container ${container} is writegate's: a shell there would run as the proxy, with its credentials and around its rules (debug the agent's container instead)`
    return { status: 200, body: deny(req.uid, message), summary: { ...named, outcome: 'rejected', message } }
  }
  return { status: 200, body: allow(req.uid), summary: { ...named, outcome: 'reviewed' } }
}
