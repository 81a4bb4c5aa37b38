import { z } from 'zod'
import { nestedDeeperThan } from '../core/json-depth.js'
import type { JsonPatchOp } from './jsonpatch.js'
import type { Pod } from './kube-types.js'

/**
 * The AdmissionReview (admission.k8s.io/v1) edge: the fields the injector relies on are
 * validated here, everything else in the pod is kept as sent (loose objects), because the
 * patch indexes into the object the API server holds.
 */

const name = z.string().min(1)
const stringMap = z.record(z.string(), z.string())

const envVar = z.looseObject({
  name,
  value: z.string().optional(),
  valueFrom: z.record(z.string(), z.unknown()).optional(),
})
const container = z.looseObject({
  name,
  env: z.array(envVar).optional(),
  envFrom: z.array(z.looseObject({ secretRef: z.looseObject({ name: z.string() }).optional() })).optional(),
  ports: z.array(z.looseObject({ containerPort: z.number().int() })).optional(),
  volumeMounts: z.array(z.looseObject({ name, mountPath: z.string() })).optional(),
  securityContext: z.record(z.string(), z.unknown()).optional(),
  targetContainerName: z.string().optional(),
})
const volume = z.looseObject({
  name,
  configMap: z.looseObject({ name: z.string() }).optional(),
  secret: z.looseObject({ secretName: z.string() }).optional(),
  emptyDir: z.record(z.string(), z.unknown()).optional(),
  projected: z
    .looseObject({
      sources: z
        .array(z.looseObject({ secret: z.looseObject({ name: z.string().optional() }).optional() }))
        .optional(),
    })
    .optional(),
})

export const podSchema = z.looseObject({
  metadata: z
    .looseObject({
      name: z.string().optional(),
      generateName: z.string().optional(),
      namespace: z.string().optional(),
      labels: stringMap.optional(),
      annotations: stringMap.optional(),
    })
    .optional(),
  spec: z.looseObject({
    containers: z.array(container).min(1),
    initContainers: z.array(container).optional(),
    ephemeralContainers: z.array(container).optional(),
    volumes: z.array(volume).optional(),
    hostNetwork: z.boolean().optional(),
    shareProcessNamespace: z.boolean().optional(),
    hostPID: z.boolean().optional(),
    securityContext: z.looseObject({ runAsUser: z.number().int().optional() }).optional(),
  }),
})

export const admissionReviewSchema = z.object({
  apiVersion: z.literal('admission.k8s.io/v1'),
  kind: z.literal('AdmissionReview'),
  request: z.looseObject({
    uid: z.string().min(1),
    kind: z.looseObject({ group: z.string(), version: z.string(), kind: z.string() }),
    operation: z.string().min(1),
    namespace: z.string().optional(),
    name: z.string().optional(),
    subResource: z.string().optional(),
    object: z.unknown().optional(),
    /** The pod before an UPDATE. */
    oldObject: z.unknown().optional(),
    dryRun: z.boolean().optional(),
  }),
})

/** A CONNECT review's object for `kubectl exec` / `attach` (PodExecOptions, PodAttachOptions). */
export const podConnectOptionsSchema = z.looseObject({ container: z.string().optional() })

export type AdmissionReview = z.infer<typeof admissionReviewSchema>
export type AdmissionRequest = AdmissionReview['request']

export interface Issue {
  path: string
  message: string
}

export function issuesOf(error: z.ZodError): Issue[] {
  return error.issues.map((i) => ({ path: i.path.map(String).join('.'), message: i.message }))
}

export type PodReading = { ok: true; pod: Pod } | { ok: false; issues: Issue[] }

/** The review's object as a Pod, or what is wrong with it. */
export function readPod(object: unknown): PodReading {
  // Comparing and copying containers walks them recursively: past this, the stack runs out.
  if (nestedDeeperThan(object)) return { ok: false, issues: [{ path: '', message: 'nested too deeply' }] }
  const r = podSchema.safeParse(object)
  if (!r.success) return { ok: false, issues: issuesOf(r.error) }
  // The schema checks the fields the domain types describe; the rest passes through untouched.
  return { ok: true, pod: r.data as unknown as Pod }
}

export interface AdmissionResponseBody {
  apiVersion: 'admission.k8s.io/v1'
  kind: 'AdmissionReview'
  response: {
    uid: string
    allowed: boolean
    patchType?: 'JSONPatch'
    patch?: string
    status?: { code: number; message: string }
  }
}

export function allow(uid: string, patch: readonly JsonPatchOp[] = []): AdmissionResponseBody {
  return {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    response: {
      uid,
      allowed: true,
      ...(patch.length > 0
        ? { patchType: 'JSONPatch' as const, patch: Buffer.from(JSON.stringify(patch)).toString('base64') }
        : {}),
    },
  }
}

export function deny(uid: string, message: string, code = 400): AdmissionResponseBody {
  return {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    response: { uid, allowed: false, status: { code, message } },
  }
}
