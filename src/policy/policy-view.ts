import {
  foldLayers,
  type Layer,
  type PolicyLayer,
  type PolicyMap,
  type PolicyScope,
  principalStack,
} from '../core/policy-layers.js'
import { type Environment, MODES, type Mode, Vocabulary } from '../core/verbs.js'

/** The policy object of interface.md, as every policy endpoint returns it. */
export interface PolicyObject {
  policyId: string
  scope: PolicyScope
  environment: Environment | null
  policy: PolicyMap
  version: number
  updatedAt: number | null
  tenantId: string
  effectivePolicy?: Record<string, Mode>
  policyProvenance?: Record<string, Layer>
  principalId?: string
  principalName?: string
  inert?: boolean
  modes?: string[]
  verbs?: string[]
  customVerbs?: string[]
}

export function policyId(tenantId: string, scope: PolicyScope, key: string): string {
  if (scope === 'tenant') return `pol_${tenantId}_tenant`
  if (scope === 'environment') return `pol_${tenantId}_env_${key}`
  return `pol_${tenantId}_prn_${key}`
}

export function layerOrEmpty(l: PolicyLayer | null | undefined): PolicyLayer {
  return l ?? { policy: {}, version: 0, updatedAt: null }
}

interface ViewInput {
  tenantId: string
  vocab: Vocabulary
  tenant: PolicyLayer
  environment?: { name: Environment; layer: PolicyLayer } | undefined
  principal?: { id: string; name: string; layer: PolicyLayer; inert: boolean } | undefined
  /** Which layer this object is. */
  scope: PolicyScope
}

/** A single-override view: the layer itself plus the folded result and the vocabulary. */
export function overrideView(v: ViewInput): PolicyObject {
  const own =
    v.scope === 'tenant'
      ? v.tenant
      : v.scope === 'environment'
        ? (v.environment?.layer as PolicyLayer)
        : (v.principal?.layer as PolicyLayer)
  const key =
    v.scope === 'tenant'
      ? ''
      : v.scope === 'environment'
        ? (v.environment?.name as string)
        : (v.principal?.id as string)
  const stack = principalStack(
    v.tenant,
    v.environment?.layer,
    v.principal?.layer,
    v.principal?.inert ?? false,
  )
  const { effectivePolicy, policyProvenance } = foldLayers(v.vocab, stack)
  const out: PolicyObject = {
    policyId: policyId(v.tenantId, v.scope, key),
    scope: v.scope,
    environment: v.environment?.name ?? null,
    policy: own.policy,
    effectivePolicy,
    policyProvenance,
    version: own.version,
    updatedAt: own.updatedAt,
    tenantId: v.tenantId,
    modes: [...MODES],
    verbs: v.vocab.liveVerbs(),
  }
  if (v.principal) {
    out.principalId = v.principal.id
    out.principalName = v.principal.name
    out.inert = v.principal.inert
  }
  return out
}

export { Vocabulary }
