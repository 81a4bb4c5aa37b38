import type { AuditLog } from '../audit/audit-log.js'
import type { Clock } from '../core/clock.js'
import { nowSeconds } from '../core/clock.js'
import { ERRORS, fail } from '../core/errors.js'
import { newId } from '../core/ids.js'
import { renameVerbInPolicy } from '../core/policy-layers.js'
import { draft } from '../core/receipt.js'
import {
  BUILTIN_VERBS,
  type CustomVerb,
  isBuiltinName,
  isValidCustomVerbName,
  MAX_CUSTOM_VERBS,
} from '../core/verbs.js'
import type { StateChanges } from '../gate/state-change.js'
import { actorOf, type KeyCaller } from '../identity/caller.js'
import type { Stores, SystemOfRecord } from '../store/ports/index.js'

export interface VerbRecord {
  name: string
  builtin: boolean
  status: 'live' | 'deprecated'
  defaultMode?: string
  description?: string
  aliasOf?: string | null
  createdAt?: number
  deprecatedAt?: number | null
}

export interface VerbService {
  create(caller: KeyCaller, input: { name: string; description?: string | undefined }): Promise<VerbRecord>
  list(caller: KeyCaller): Promise<{ tenantId: string; verbs: VerbRecord[] }>
  get(caller: KeyCaller, name: string): Promise<VerbRecord>
  update(
    caller: KeyCaller,
    name: string,
    patch: { name?: string | undefined; description?: string | undefined },
  ): Promise<VerbRecord>
}

export function customRecord(v: CustomVerb): VerbRecord {
  return {
    name: v.name,
    builtin: false,
    status: v.status,
    description: v.description,
    aliasOf: v.aliasOf,
    createdAt: v.createdAt,
    deprecatedAt: v.deprecatedAt,
  }
}

/** Name rules, in the order clients find most useful: built-in first, then shape. */
function checkNewName(raw: string): string {
  const name = raw.toLowerCase()
  if (isBuiltinName(name)) fail(ERRORS.builtinCollision, { name })
  if (!isValidCustomVerbName(name)) {
    fail(ERRORS.invalidName, {
      rules:
        'domain.action style: 1-64 characters of letters, digits, underscores and dots, with at least one dot; stored lowercase',
    })
  }
  return name
}

export function createVerbService(deps: {
  sor: SystemOfRecord
  audit: AuditLog
  clock: Clock
  /** Every change: the version bump, the change and its receipt in one transaction, then the snapshot published. */
  changes: StateChanges
}): VerbService {
  const { sor, audit, clock, changes } = deps

  /**
   * Optimistic concurrency on the registry: the change goes through only if no other
   * registry change committed since it read the registry version; otherwise 409
   * registry_conflict, never a lost update.
   */
  async function registryChange<T>(
    caller: KeyCaller,
    fn: (stores: Stores, at: number) => Promise<T>,
  ): Promise<T> {
    // The tenant lock is taken first (the version bump), then the registry's version checked.
    return changes.apply(caller.tenantId, async (stores) => {
      const seen = await stores.verbs.registryVersion(caller.tenantId)
      if (!(await stores.verbs.advanceRegistry(caller.tenantId, seen))) fail(ERRORS.registryConflict)
      return fn(stores, nowSeconds(clock))
    })
  }

  async function ensureRoom(stores: Stores, tenantId: string): Promise<void> {
    if ((await stores.verbs.count(tenantId)) >= MAX_CUSTOM_VERBS)
      fail(ERRORS.verbLimit, { limit: MAX_CUSTOM_VERBS })
  }

  async function ensureFree(stores: Stores, tenantId: string, name: string): Promise<void> {
    const existing = await stores.verbs.get(tenantId, name)
    if (existing) fail(ERRORS.nameTaken, { name, status: existing.status })
  }

  return {
    async create(caller, input) {
      const name = checkNewName(input.name)
      return registryChange(caller, async (stores, at) => {
        await ensureFree(stores, caller.tenantId, name)
        await ensureRoom(stores, caller.tenantId)
        const verb: CustomVerb = {
          name,
          description: input.description ?? '',
          status: 'live',
          aliasOf: null,
          createdAt: at,
          deprecatedAt: null,
        }
        await stores.verbs.insert(caller.tenantId, verb)
        await audit.appendWith(stores, [
          draft({
            receiptId: newId('receipt'),
            tenantId: caller.tenantId,
            kind: 'VERB_CREATE',
            createdAt: at,
            verb: name,
            keyId: caller.keyId,
            principalId: caller.principalId,
            principalName: caller.principalName,
            detail: { actor: actorOf(caller), description: verb.description },
          }),
        ])
        return customRecord(verb)
      })
    },

    async list(caller) {
      const custom = await sor.stores.verbs.list(caller.tenantId)
      const builtins: VerbRecord[] = Object.entries(BUILTIN_VERBS).map(([name, defaultMode]) => ({
        name,
        builtin: true,
        status: 'live',
        defaultMode,
      }))
      return { tenantId: caller.tenantId, verbs: [...builtins, ...custom.map(customRecord)] }
    },

    async get(caller, name) {
      const v = await sor.stores.verbs.get(caller.tenantId, name)
      if (!v) fail(ERRORS.verbNotFound)
      return customRecord(v)
    },

    async update(caller, rawName, patch) {
      if (patch.name === undefined && patch.description === undefined) fail(ERRORS.nothingToUpdate)
      // One lookup, inside the transaction the registry version guards. A refusal rolls back
      // the registry advance, so nothing is changed and no one is told of a change.
      return registryChange(caller, async (stores, at) => {
        const current = await stores.verbs.get(caller.tenantId, rawName)
        // A deprecated or missing verb is 404 whatever the patch says, so look it up first.
        if (current?.status !== 'live') fail(ERRORS.verbNotFound)
        const newName = patch.name === undefined ? undefined : checkNewName(patch.name)
        const receiptBase = {
          tenantId: caller.tenantId,
          kind: 'VERB_UPDATE' as const,
          createdAt: at,
          keyId: caller.keyId,
          principalId: caller.principalId,
          principalName: caller.principalName,
        }
        if (newName === undefined) {
          const description = patch.description as string
          await stores.verbs.setDescription(caller.tenantId, current.name, description)
          await audit.appendWith(stores, [
            draft({
              ...receiptBase,
              receiptId: newId('receipt'),
              verb: current.name,
              detail: { actor: actorOf(caller), description: { from: current.description, to: description } },
            }),
          ])
          return customRecord({ ...current, description })
        }
        await ensureFree(stores, caller.tenantId, newName)
        await ensureRoom(stores, caller.tenantId)
        const renamed: CustomVerb = {
          name: newName,
          description: patch.description ?? current.description,
          status: 'live',
          aliasOf: null,
          createdAt: at,
          deprecatedAt: null,
        }
        await stores.verbs.insert(caller.tenantId, renamed)
        await stores.verbs.deprecate(caller.tenantId, current.name, newName, at)
        // Every policy that named the old verb now names the new one; each touched layer's version moves by one.
        const migrated: { scope: string; scopeKey: string; version: number }[] = []
        for (const layer of await stores.policies.list(caller.tenantId)) {
          const next = renameVerbInPolicy(layer.policy, current.name, newName)
          if (!next) continue
          const written = await stores.policies.write(caller.tenantId, layer.scope, layer.scopeKey, next, at)
          migrated.push({ scope: layer.scope, scopeKey: layer.scopeKey, version: written.version })
        }
        const grantsMoved = await stores.grants.renameVerb(caller.tenantId, current.name, newName)
        await audit.appendWith(stores, [
          draft({
            ...receiptBase,
            receiptId: newId('receipt'),
            verb: newName,
            requestedVerb: current.name,
            detail: {
              actor: actorOf(caller),
              rename: { from: current.name, to: newName },
              migratedPolicies: migrated,
              grantsMoved,
              ...(patch.description !== undefined
                ? { description: { from: current.description, to: patch.description } }
                : {}),
            },
          }),
        ])
        return customRecord(renamed)
      })
    },
  }
}
