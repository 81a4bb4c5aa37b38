import type { AuditLog } from '../audit/audit-log.js'
import type { Clock } from '../core/clock.js'
import { nowSeconds } from '../core/clock.js'
import { ERRORS, fail } from '../core/errors.js'
import { newId } from '../core/ids.js'
import { canonicalJson } from '../core/jcs.js'
import { draft } from '../core/receipt.js'
import { sha256Hex } from '../core/secret-hash.js'
import { Vocabulary } from '../core/verbs.js'
import type { StateChanges } from '../gate/state-change.js'
import { actorOf, type KeyCaller } from '../identity/caller.js'
import type { Stores, SystemOfRecord } from '../store/ports/index.js'
import { isPrivateHost, resolvesPrivate } from './private-upstream.js'
import { SYSTEM_LIMITS, type SystemDefinition, type SystemRecord, verbsOf } from './system-definition.js'
import { paramsSchemaProblem } from './systems-registry.js'

/** Who enrols: an admin key (the API), or the operator (a deprecated systems file imported at start). */
export type SystemActor = KeyCaller | { kind: 'operator'; tenantId: string; source: string }

export interface SystemService {
  create(actor: SystemActor, definition: SystemDefinition): Promise<SystemRecord>
  list(actor: SystemActor): Promise<SystemRecord[]>
  get(actor: SystemActor, systemId: string): Promise<SystemRecord>
  /** Whole replacement; `ifVersion`, when given, must be the current version (else 409). */
  replace(
    actor: SystemActor,
    definition: SystemDefinition,
    opts?: { ifVersion?: number | undefined },
  ): Promise<SystemRecord>
  remove(actor: SystemActor, systemId: string, opts?: { ifVersion?: number | undefined }): Promise<void>
  /**
   * Enrols a definition as given, creating or replacing (and leaving an equal one alone):
   * how a deprecated systems file is imported. Returns what it did.
   */
  upsert(actor: SystemActor, definition: SystemDefinition): Promise<'created' | 'updated' | 'unchanged'>
}

/** What a receipt says about a definition: enough to tell versions apart, never a secret (there is none to tell). */
function summary(d: SystemDefinition) {
  return {
    upstream: d.upstream,
    reads: d.reads,
    routes: d.routes.length,
    tools: d.tools.map((t) => t.name),
    routesSha256: sha256Hex(canonicalJson(d.routes)),
    toolsSha256: sha256Hex(canonicalJson(d.tools)),
    // Whether its connections are held to public addresses (an operator's change clears it).
    publicOnly: d.publicOnly === true,
    // The reference only: a variable name or a file path, and the header it goes in.
    credential: d.credential
      ? {
          header: d.credential.header,
          ...(d.credential.fromEnv ? { fromEnv: d.credential.fromEnv } : { fromFile: d.credential.fromFile }),
        }
      : null,
  }
}

/**
 * Enrolled systems as a control-plane resource (`/v1/systems`): each change is a decision-state
 * change (version bump, receipt, snapshot published before the answer), so a route change is
 * linearizable exactly like a policy change. Another tenant's system id is a missing one.
 */
export function createSystemService(deps: {
  sor: SystemOfRecord
  audit: AuditLog
  clock: Clock
  changes: StateChanges
  /** Loopback, private and link-local upstreams (a setting; refused by default outside the embedded default). */
  allowPrivateUpstreams: boolean
  /** The addresses a host name resolves to now (DNS), to refuse a name that points inside. */
  addressesOf: (host: string) => Promise<string[]>
}): SystemService {
  const { sor, audit, clock, changes } = deps

  /**
   * The upstream's host, outside any transaction (it may ask DNS): the operator's own file is
   * trusted with its network; an admin's API call is not. Returns the definition to store,
   * marked `publicOnly` when its upstream was held to public addresses.
   */
  async function vetUpstream(actor: SystemActor, d: SystemDefinition): Promise<SystemDefinition> {
    const { publicOnly: _, ...definition } = d
    const host = new URL(d.upstream).hostname
    if (actor.kind !== 'operator' && !deps.allowPrivateUpstreams) {
      if (isPrivateHost(host))
        fail(
          ERRORS.privateUpstream,
          { field: 'upstream', host },
          {
            message: `upstream: ${host} is a loopback, private or link-local address, which this installation does not allow`,
          },
        )
      const address = await resolvesPrivate(host, deps.addressesOf)
      if (address)
        fail(
          ERRORS.privateUpstream,
          { field: 'upstream', host, address },
          {
            message: `upstream: ${host} resolves to ${address}, a loopback, private or link-local address, which this installation does not allow`,
          },
        )
      // Vetted as public now: held to it at every connection, whatever its DNS says later.
      return { ...definition, publicOnly: true }
    }
    return definition
  }

  /** Checks what needs the tenant's state: its vocabulary, its other systems' tool names, the installation's rules. */
  async function vet(stores: Stores, actor: SystemActor, d: SystemDefinition): Promise<void> {
    const { tenantId } = actor
    d.tools.forEach((t, j) => {
      const problem = paramsSchemaProblem(t.params)
      if (problem)
        fail(
          ERRORS.invalidRequest,
          { issues: [{ path: `tools.${j}.params`, message: `not a valid JSON Schema: ${problem}` }] },
          { message: `invalid body: tools.${j}.params: not a valid JSON Schema: ${problem}` },
        )
    })
    const vocab = new Vocabulary(await stores.verbs.list(tenantId))
    const unknown = verbsOf(d).filter((v) => !vocab.resolve(v.verb))
    if (unknown.length > 0) {
      const first = unknown[0] as (typeof unknown)[number]
      fail(
        ERRORS.unknownVerb,
        {
          verbs: [...new Set(unknown.map((v) => v.verb))],
          issues: unknown.map((v) => ({ path: v.path.join('.'), message: `unknown verb ${v.verb}` })),
        },
        { message: `unknown verb: ${first.path.join('.')}: ${first.verb} is not in the tenant's vocabulary` },
      )
    }
    // Tools are called by name (POST /v1/check `tool`), so a name belongs to one system of the tenant.
    const names = new Set(d.tools.map((t) => t.name))
    let bytes = Buffer.byteLength(JSON.stringify(d))
    for (const other of await stores.systems.list(tenantId)) {
      if (other.systemId === d.systemId) continue
      bytes += Buffer.byteLength(JSON.stringify(other))
      const clash = other.tools.find((t) => names.has(t.name))
      if (clash) fail(ERRORS.toolTaken, { tool: clash.name, systemId: other.systemId })
    }
    if (bytes > SYSTEM_LIMITS.bytesPerTenant)
      fail(ERRORS.systemsSizeLimit, { limit: SYSTEM_LIMITS.bytesPerTenant, bytes })
  }

  async function current(stores: Stores, caller: SystemActor, systemId: string, ifVersion?: number) {
    const s = await stores.systems.get(caller.tenantId, systemId)
    if (!s || s.deletedAt !== null) fail(ERRORS.systemNotFound, { systemId })
    if (ifVersion !== undefined && ifVersion !== s.version)
      fail(ERRORS.versionConflict, { systemId, version: s.version, ifVersion })
    return s
  }

  const receiptBase = (actor: SystemActor, at: number, stateVersion: number) => ({
    receiptId: newId('receipt'),
    tenantId: actor.tenantId,
    createdAt: at,
    principalId: actor.kind === 'key' ? actor.principalId : null,
    principalName: actor.kind === 'key' ? actor.principalName : null,
    keyId: actor.kind === 'key' ? actor.keyId : null,
    policyVersion: stateVersion,
  })
  const actorDetail = (actor: SystemActor) =>
    actor.kind === 'key' ? actorOf(actor) : { type: 'operator', source: actor.source }

  /** Whether two definitions mean the same system: every field a definition has (not publicOnly, which is the control plane's). */
  const same = (a: SystemDefinition, b: SystemDefinition) => {
    const strip = ({
      systemId,
      kind,
      mcp,
      graphql,
      upstream,
      credential,
      caBundle,
      baseUrlEnv,
      reads,
      routes,
      tools,
    }: SystemDefinition) => ({
      systemId,
      kind,
      mcp,
      graphql,
      upstream,
      credential,
      caBundle,
      baseUrlEnv,
      reads,
      routes,
      tools,
    })
    return canonicalJson(strip(a)) === canonicalJson(strip(b))
  }

  const api: SystemService = {
    async create(caller, input) {
      const d = await vetUpstream(caller, input)
      return changes.apply(caller.tenantId, async (stores, stateVersion) => {
        const at = nowSeconds(clock)
        const existing = await stores.systems.get(caller.tenantId, d.systemId)
        if (existing)
          fail(
            ERRORS.systemExists,
            { systemId: d.systemId, deleted: existing.deletedAt !== null },
            existing.deletedAt !== null
              ? { message: 'system id was used by a deleted system and is never reused' }
              : {},
          )
        if ((await stores.systems.count(caller.tenantId)) >= SYSTEM_LIMITS.systemsPerTenant)
          fail(ERRORS.systemLimit, { limit: SYSTEM_LIMITS.systemsPerTenant })
        await vet(stores, caller, d)
        const record = await stores.systems.insert(caller.tenantId, d.systemId, d, at)
        if (!record) fail(ERRORS.systemExists, { systemId: d.systemId })
        await audit.appendWith(stores, [
          draft({
            ...receiptBase(caller, at, stateVersion),
            kind: 'SYSTEM_CREATE',
            target: d.systemId,
            detail: {
              actor: actorDetail(caller),
              systemId: d.systemId,
              version: record.version,
              ...summary(d),
            },
          }),
        ])
        return record
      })
    },

    async list(caller) {
      return sor.stores.systems.list(caller.tenantId)
    },

    async get(caller, systemId) {
      const s = await sor.stores.systems.get(caller.tenantId, systemId)
      if (!s || s.deletedAt !== null) fail(ERRORS.systemNotFound, { systemId })
      const { deletedAt: _, ...record } = s
      return record
    },

    async replace(caller, input, opts = {}) {
      const d = await vetUpstream(caller, input)
      return changes.apply(caller.tenantId, async (stores, stateVersion) => {
        const at = nowSeconds(clock)
        const before = await current(stores, caller, d.systemId, opts.ifVersion)
        await vet(stores, caller, d)
        const record = await stores.systems.replace(caller.tenantId, d.systemId, d, at)
        if (!record) fail(ERRORS.systemNotFound, { systemId: d.systemId })
        const was = summary(before)
        const now = summary(d)
        await audit.appendWith(stores, [
          draft({
            ...receiptBase(caller, at, stateVersion),
            kind: 'SYSTEM_UPDATE',
            target: d.systemId,
            detail: {
              actor: actorDetail(caller),
              systemId: d.systemId,
              previousVersion: before.version,
              version: record.version,
              ...now,
              changed: Object.keys(now).filter(
                (k) =>
                  canonicalJson(was[k as keyof typeof was]) !== canonicalJson(now[k as keyof typeof now]),
              ),
            },
          }),
        ])
        return record
      })
    },

    async upsert(actor, d) {
      const existing = await sor.stores.systems.get(actor.tenantId, d.systemId)
      if (!existing || existing.deletedAt !== null) {
        await api.create(actor, d)
        return 'created'
      }
      if (same(existing, d)) return 'unchanged'
      await api.replace(actor, d, { ifVersion: existing.version })
      return 'updated'
    },

    async remove(caller, systemId, opts = {}) {
      await changes.apply(caller.tenantId, async (stores, stateVersion) => {
        const at = nowSeconds(clock)
        const before = await current(stores, caller, systemId, opts.ifVersion)
        if (!(await stores.systems.remove(caller.tenantId, systemId, at)))
          fail(ERRORS.systemNotFound, { systemId })
        await audit.appendWith(stores, [
          draft({
            ...receiptBase(caller, at, stateVersion),
            kind: 'SYSTEM_DELETE',
            target: systemId,
            detail: { actor: actorDetail(caller), systemId, version: before.version },
          }),
        ])
      })
    },
  }
  return api
}
