import type { AuditLog } from '../audit/audit-log.js'
import type { Clock } from '../core/clock.js'
import { nowSeconds } from '../core/clock.js'
import { ERRORS, fail } from '../core/errors.js'
import type { Principal } from '../core/identity.js'
import { newId } from '../core/ids.js'
import { isValidPrincipalName } from '../core/names.js'
import { draft, type ReceiptDraft } from '../core/receipt.js'
import type { StateChanges } from '../gate/state-change.js'
import type { PrincipalWithKeys, Stores, SystemOfRecord } from '../store/ports/index.js'
import { actorOf, type KeyCaller } from './caller.js'

export interface PrincipalView {
  principalId: string
  tenantId: string
  name: string
  disabled: boolean
  keyCount: number
  createdAt: number
  deletedAt: number | null
}

export interface RevokeKeysResult {
  principalId: string
  revokedCount: number
  revokedKeys: string[]
}

export interface PrincipalService {
  create(caller: KeyCaller, input: { name: string; disabled?: boolean | undefined }): Promise<PrincipalView>
  list(caller: KeyCaller, includeDeleted: boolean): Promise<PrincipalView[]>
  get(caller: KeyCaller, principalId: string): Promise<PrincipalView>
  update(
    caller: KeyCaller,
    principalId: string,
    patch: { name?: string | undefined; disabled?: boolean | undefined },
  ): Promise<PrincipalView>
  revokeKeys(caller: KeyCaller, principalId: string, reason: string | null): Promise<RevokeKeysResult>
  remove(caller: KeyCaller, principalId: string): Promise<PrincipalView>
}

export function principalView(p: Principal, keyCount: number): PrincipalView {
  return {
    principalId: p.id,
    tenantId: p.tenantId,
    name: p.name,
    disabled: p.disabled,
    keyCount,
    createdAt: p.createdAt,
    deletedAt: p.deletedAt,
  }
}

export function createPrincipalService(deps: {
  sor: SystemOfRecord
  audit: AuditLog
  clock: Clock
  /** Every change: the version bump, the change and its receipt in one transaction, then the snapshot published. */
  changes: StateChanges
}): PrincipalService {
  const { sor, audit, clock, changes } = deps

  function checkName(name: string): void {
    if (!isValidPrincipalName(name)) {
      fail(ERRORS.invalidName, {
        rules:
          '1-64 characters of letters, digits, spaces, hyphens, underscores and periods, with at least one letter or digit',
      })
    }
  }

  /** Locks the live principal (the change already holds the tenant's lock), or 404s. */
  async function lockLive(stores: Stores, caller: KeyCaller, principalId: string): Promise<Principal> {
    const p = await stores.principals.getForUpdate(caller.tenantId, principalId)
    if (!p || p.deletedAt !== null) fail(ERRORS.principalNotFound)
    return p
  }

  async function revokeAll(
    stores: Stores,
    caller: KeyCaller,
    p: Principal,
    reason: string | null,
    at: number,
    receipts: ReceiptDraft[],
  ): Promise<string[]> {
    const live = await stores.keys.liveKeysOfPrincipal(caller.tenantId, p.id)
    const revoked = await stores.keys.revoke(
      caller.tenantId,
      live.map((k) => k.id),
      at,
      reason,
    )
    for (const keyId of revoked) {
      receipts.push(
        draft({
          receiptId: newId('receipt'),
          tenantId: caller.tenantId,
          kind: 'REVOKE',
          decision: 'REVOKE',
          createdAt: at,
          principalId: p.id,
          principalName: p.name,
          keyId,
          reason,
          detail: { actor: actorOf(caller), target: { keyId } },
        }),
      )
    }
    return revoked
  }

  return {
    async create(caller, input) {
      checkName(input.name)
      return changes.apply(caller.tenantId, async (stores) => {
        const at = nowSeconds(clock)
        const p: Principal = {
          id: newId('principal'),
          tenantId: caller.tenantId,
          name: input.name,
          disabled: input.disabled ?? false,
          createdAt: at,
          deletedAt: null,
        }
        if (!(await stores.principals.create(p))) fail(ERRORS.nameTaken)
        await audit.appendWith(stores, [
          draft({
            receiptId: newId('receipt'),
            tenantId: caller.tenantId,
            kind: 'PRINCIPAL_CREATE',
            createdAt: at,
            principalId: p.id,
            principalName: p.name,
            keyId: caller.keyId,
            detail: { actor: actorOf(caller), disabled: p.disabled },
          }),
        ])
        return principalView(p, 0)
      })
    },

    async list(caller, includeDeleted) {
      const rows: PrincipalWithKeys[] = await sor.stores.principals.list(caller.tenantId, includeDeleted)
      return rows.map((r) => principalView(r, r.keyCount))
    },

    async get(caller, principalId) {
      const p = await sor.stores.principals.get(caller.tenantId, principalId)
      if (!p) fail(ERRORS.principalNotFound)
      return principalView(p, await sor.stores.principals.keyCount(p.id))
    },

    async update(caller, principalId, patch) {
      if (patch.name === undefined && patch.disabled === undefined) fail(ERRORS.nothingToUpdate)
      if (patch.name !== undefined) checkName(patch.name)
      // The tenant version moves with the lock even if nothing changes: it is published either way.
      return changes.apply(caller.tenantId, async (stores) => {
        const at = nowSeconds(clock)
        const before = await lockLive(stores, caller, principalId)
        const changes: Record<string, { from: unknown; to: unknown }> = {}
        let after = before
        if (patch.name !== undefined && patch.name !== before.name) {
          if (!(await stores.principals.rename(caller.tenantId, principalId, patch.name)))
            fail(ERRORS.nameTaken)
          changes.name = { from: before.name, to: patch.name }
          after = { ...after, name: patch.name }
        }
        if (patch.disabled !== undefined && patch.disabled !== before.disabled) {
          await stores.principals.setDisabled(caller.tenantId, principalId, patch.disabled, at)
          changes.disabled = { from: before.disabled, to: patch.disabled }
          after = { ...after, disabled: patch.disabled }
        }
        if (Object.keys(changes).length > 0) {
          await audit.appendWith(stores, [
            draft({
              receiptId: newId('receipt'),
              tenantId: caller.tenantId,
              kind: 'PRINCIPAL_UPDATE',
              createdAt: at,
              principalId,
              principalName: after.name,
              keyId: caller.keyId,
              detail: { actor: actorOf(caller), changes },
            }),
          ])
        }
        return principalView(after, await stores.principals.keyCount(principalId))
      })
    },

    async revokeKeys(caller, principalId, reason) {
      return changes.apply(caller.tenantId, async (stores) => {
        const at = nowSeconds(clock)
        const p = await lockLive(stores, caller, principalId)
        const receipts: ReceiptDraft[] = []
        const revoked = await revokeAll(stores, caller, p, reason, at, receipts)
        await audit.appendWith(stores, receipts)
        return { principalId, revokedCount: revoked.length, revokedKeys: revoked }
      })
    },

    async remove(caller, principalId) {
      return changes.apply(caller.tenantId, async (stores) => {
        const at = nowSeconds(clock)
        const p = await lockLive(stores, caller, principalId)
        const receipts: ReceiptDraft[] = []
        const revoked = await revokeAll(stores, caller, p, 'principal deleted', at, receipts)
        await stores.principals.tombstone(caller.tenantId, principalId, at)
        receipts.push(
          draft({
            receiptId: newId('receipt'),
            tenantId: caller.tenantId,
            kind: 'PRINCIPAL_DELETE',
            createdAt: at,
            principalId,
            principalName: p.name,
            keyId: caller.keyId,
            detail: { actor: actorOf(caller), revokedKeys: revoked },
          }),
        )
        await audit.appendWith(stores, receipts)
        return principalView({ ...p, deletedAt: at }, 0)
      })
    },
  }
}
