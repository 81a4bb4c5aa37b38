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

/**
 * A list read element by element, stopping at the first that does not fit. `z.array` reports
 * every bad element, with its path and input: 1.5 million of them in one 3 MB review took the
 * injector 1.5 GB and 9 s (out of memory under the chart's limit), and 300,000 in one container's
 * `env` overflowed the stack (found in review). One is all the refusal names.
 */
function listOf<T extends z.ZodType>(item: T) {
  return z.array(z.unknown()).transform((items, ctx): z.output<T>[] => {
    const out: z.output<T>[] = []
    for (let i = 0; i < items.length; i++) {
      const r = item.safeParse(items[i])
      if (!r.success) {
        const first = r.error.issues[0]
        ctx.issues.push({
          code: 'custom',
          message: first?.message ?? 'invalid',
          path: [i, ...(first?.path ?? [])],
          input: items[i],
        })
        return z.NEVER
      }
      out.push(r.data)
    }
    return out
  })
}

/** A map of strings (labels, annotations), refused at its first value that is not one (as listOf). */
const stringMap = z.record(z.string(), z.unknown()).transform((map, ctx): Record<string, string> => {
  for (const [key, value] of Object.entries(map))
    if (typeof value !== 'string') {
      ctx.issues.push({ code: 'custom', message: 'expected a string', path: [key], input: value })
      return z.NEVER
    }
  return map as Record<string, string>
})

const envVar = z.looseObject({
  name,
  value: z.string().optional(),
  valueFrom: z.record(z.string(), z.unknown()).optional(),
})
const container = z.looseObject({
  name,
  env: listOf(envVar).optional(),
  envFrom: listOf(z.looseObject({ secretRef: z.looseObject({ name: z.string() }).optional() })).optional(),
  ports: listOf(z.looseObject({ containerPort: z.number().int() })).optional(),
  volumeMounts: listOf(z.looseObject({ name, mountPath: z.string() })).optional(),
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
      sources: listOf(
        z.looseObject({ secret: z.looseObject({ name: z.string().optional() }).optional() }),
      ).optional(),
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
    containers: listOf(container).refine((c) => c.length > 0, { message: 'expected at least one container' }),
    initContainers: listOf(container).optional(),
    ephemeralContainers: listOf(container).optional(),
    volumes: listOf(volume).optional(),
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
