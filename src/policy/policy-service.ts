import type { AuditLog } from '../audit/audit-log.js'
import type { Clock } from '../core/clock.js'
import { nowSeconds } from '../core/clock.js'
import { ERRORS, fail } from '../core/errors.js'
import type { Principal } from '../core/identity.js'
import { newId } from '../core/ids.js'
import { checkPolicyBody, mergePolicy, type PolicyMap, type PolicyScope } from '../core/policy-layers.js'
import { draft } from '../core/receipt.js'
import { ENVIRONMENTS, type Environment, isEnvironment, Vocabulary } from '../core/verbs.js'
import type { StateChanges } from '../gate/state-change.js'
import { actorOf, type KeyCaller } from '../identity/caller.js'
import type { Stores, SystemOfRecord } from '../store/ports/index.js'
import { layerOrEmpty, overrideView, type PolicyObject, policyId } from './policy-view.js'

export interface PolicyService {
  getTenant(caller: KeyCaller): Promise<PolicyObject>
  putTenant(caller: KeyCaller, body: unknown): Promise<PolicyObject>
  getEnvironment(caller: KeyCaller, env: string): Promise<PolicyObject>
  putEnvironment(caller: KeyCaller, env: string, body: unknown): Promise<PolicyObject>
  getPrincipal(caller: KeyCaller, principalId: string, env: string | undefined): Promise<PolicyObject>
  putPrincipal(caller: KeyCaller, principalId: string, body: unknown): Promise<PolicyObject>
  list(
    caller: KeyCaller,
  ): Promise<{ tenantId: string; environments: Environment[]; policies: PolicyObject[] }>
}

function environmentOf(env: string | undefined): Environment | undefined {
  if (env === undefined) return undefined
  if (!isEnvironment(env))
    fail(ERRORS.unknownEnvironment, { environment: env, environments: [...ENVIRONMENTS] })
  return env
}

/** Accepts a bare verb→mode map or `{policy: {...}}` (no verb is named `policy`: custom verbs hold a dot). */
function unwrapBody(body: unknown): Record<string, unknown> {
  if (body === undefined || body === null) fail(ERRORS.emptyPolicy)
  if (typeof body !== 'object' || Array.isArray(body))
    fail(ERRORS.invalidRequest, undefined, { message: 'invalid body: expected a map of verb to mode' })
  const o = body as Record<string, unknown>
  const keys = Object.keys(o)
  if (keys.length === 1 && keys[0] === 'policy') {
    const inner = o.policy
    if (inner === null || typeof inner !== 'object' || Array.isArray(inner))
      fail(ERRORS.invalidRequest, undefined, {
        message: 'invalid body: policy must be a map of verb to mode',
      })
    return inner as Record<string, unknown>
  }
  return o
}

const isInert = (p: Principal) => p.deletedAt !== null || p.disabled

export function createPolicyService(deps: {
  sor: SystemOfRecord
  audit: AuditLog
  clock: Clock
  /** Every change: the version bump, the change and its receipt in one transaction, then the snapshot published. */
  changes: StateChanges
}): PolicyService {
  const { sor, audit, clock, changes } = deps

  async function vocabOf(stores: Stores, tenantId: string): Promise<Vocabulary> {
    return new Vocabulary(await stores.verbs.list(tenantId))
  }

  async function principalOf(stores: Stores, caller: KeyCaller, principalId: string): Promise<Principal> {
    const p = await stores.principals.get(caller.tenantId, principalId)
    if (!p) fail(ERRORS.principalNotFound)
    return p
  }

  /**
   * Validates, merges and writes one layer, with its POLICY_UPDATE receipt, then publishes.
   * The answer is read in the same transaction: read after it, a concurrent PUT's version
   * could be answered instead of this one's (found in review).
   */
  async function put(
    caller: KeyCaller,
    scope: PolicyScope,
    scopeKey: string,
    body: unknown,
    extra: Record<string, unknown>,
    view: (stores: Stores) => Promise<PolicyObject>,
  ): Promise<PolicyObject> {
    const sent = unwrapBody(body)
    return changes.apply(caller.tenantId, async (stores, stateVersion) => {
      const at = nowSeconds(clock)
      let principal: Principal | null = null
      if (scope === 'principal') {
        principal = await stores.principals.getForUpdate(caller.tenantId, scopeKey)
        if (!principal) fail(ERRORS.principalNotFound)
        if (isInert(principal)) fail(ERRORS.principalInactive)
      }
      const vocab = await vocabOf(stores, caller.tenantId)
      const check = checkPolicyBody(vocab, sent, scope)
      if (!check.ok) {
        const p = check.problem
        if (p.code === 'empty_policy') fail(ERRORS.emptyPolicy)
        if (p.code === 'deprecated_verb') fail(ERRORS.deprecatedVerb, { verbs: p.verbs })
        if (p.code === 'unknown_verb') fail(ERRORS.unknownVerb, { verbs: p.verbs })
        fail(ERRORS.unknownMode, { verbs: p.verbs, modes: p.modes })
      }
      const current = await stores.policies.getForUpdate(caller.tenantId, scope, scopeKey)
      const before: PolicyMap = current?.policy ?? {}
      const next = mergePolicy(before, check.entries)
      const written = await stores.policies.write(caller.tenantId, scope, scopeKey, next, at)
      const changes: Record<string, { from: string | null; to: string | null }> = {}
      for (const [verb] of check.entries) {
        const from = before[verb] ?? null
        const to = next[verb] ?? null
        if (from !== to) changes[verb] = { from, to }
      }
      await audit.appendWith(stores, [
        draft({
          receiptId: newId('receipt'),
          tenantId: caller.tenantId,
          kind: 'POLICY_UPDATE',
          createdAt: at,
          environment: scope === 'environment' ? scopeKey : null,
          principalId: principal?.id ?? null,
          principalName: principal?.name ?? null,
          keyId: caller.keyId,
          policyVersion: stateVersion,
          detail: {
            actor: actorOf(caller),
            policyId: policyId(caller.tenantId, scope, scopeKey),
            scope,
            layerVersion: written.version,
            changes,
            ...extra,
          },
        }),
      ])
      return view(stores)
    })
  }

  async function tenantView(stores: Stores, caller: KeyCaller): Promise<PolicyObject> {
    const vocab = await vocabOf(stores, caller.tenantId)
    const tenant = layerOrEmpty(await stores.policies.get(caller.tenantId, 'tenant', ''))
    return {
      ...overrideView({ tenantId: caller.tenantId, vocab, tenant, scope: 'tenant' }),
      customVerbs: vocab.liveCustomVerbs(),
    }
  }

  async function environmentView(stores: Stores, caller: KeyCaller, env: Environment): Promise<PolicyObject> {
    const vocab = await vocabOf(stores, caller.tenantId)
    const tenant = layerOrEmpty(await stores.policies.get(caller.tenantId, 'tenant', ''))
    const layer = layerOrEmpty(await stores.policies.get(caller.tenantId, 'environment', env))
    return overrideView({
      tenantId: caller.tenantId,
      vocab,
      tenant,
      environment: { name: env, layer },
      scope: 'environment',
    })
  }

  async function principalView(
    stores: Stores,
    caller: KeyCaller,
    p: Principal,
    env: Environment | undefined,
  ): Promise<PolicyObject> {
    const vocab = await vocabOf(stores, caller.tenantId)
    const tenant = layerOrEmpty(await stores.policies.get(caller.tenantId, 'tenant', ''))
    const environment = env
      ? { name: env, layer: layerOrEmpty(await stores.policies.get(caller.tenantId, 'environment', env)) }
      : undefined
    const layer = layerOrEmpty(await stores.policies.get(caller.tenantId, 'principal', p.id))
    return overrideView({
      tenantId: caller.tenantId,
      vocab,
      tenant,
      environment,
      principal: { id: p.id, name: p.name, layer, inert: isInert(p) },
      scope: 'principal',
    })
  }

  return {
    getTenant: (caller) => tenantView(sor.stores, caller),
    putTenant: (caller, body) => put(caller, 'tenant', '', body, {}, (stores) => tenantView(stores, caller)),
    async getEnvironment(caller, env) {
      return environmentView(sor.stores, caller, environmentOf(env) as Environment)
    },
    async putEnvironment(caller, env, body) {
      const e = environmentOf(env) as Environment
      return put(caller, 'environment', e, body, { environment: e }, (stores) =>
        environmentView(stores, caller, e),
      )
    },
    async getPrincipal(caller, principalId, env) {
      const e = environmentOf(env)
      const p = await principalOf(sor.stores, caller, principalId)
      return principalView(sor.stores, caller, p, e)
    },
    putPrincipal: (caller, principalId, body) =>
      put(caller, 'principal', principalId, body, {}, async (stores) =>
        principalView(stores, caller, await principalOf(stores, caller, principalId), undefined),
      ),
    async list(caller) {
      const stores = sor.stores
      const layers = await stores.policies.list(caller.tenantId)
      const tenant = layerOrEmpty(layers.find((l) => l.scope === 'tenant'))
      const brief = (
        scope: PolicyScope,
        key: string,
        l: { policy: PolicyMap; version: number; updatedAt: number | null },
        environment: Environment | null,
      ): PolicyObject => ({
        policyId: policyId(caller.tenantId, scope, key),
        scope,
        environment,
        policy: l.policy,
        version: l.version,
        updatedAt: l.updatedAt,
        tenantId: caller.tenantId,
      })
      const policies: PolicyObject[] = [brief('tenant', '', tenant, null)]
      for (const env of ENVIRONMENTS) {
        const l = layers.find((x) => x.scope === 'environment' && x.scopeKey === env)
        if (l) policies.push(brief('environment', env, l, env))
      }
      const principalLayers = layers.filter((l) => l.scope === 'principal')
      if (principalLayers.length > 0) {
        const principals = await stores.principals.list(caller.tenantId, true)
        for (const p of principals) {
          const l = principalLayers.find((x) => x.scopeKey === p.id)
          if (l)
            policies.push({ ...brief('principal', p.id, l, null), principalId: p.id, principalName: p.name })
        }
      }
      return { tenantId: caller.tenantId, environments: [...ENVIRONMENTS], policies }
    },
  }
}
