import type { Stores, SystemOfRecord } from '../store/ports/index.js'
import type { DecisionStateSink } from './decision-state.js'

/**
 * One change to a tenant's decision state (policies, verbs, principals, keys, the roster,
 * grants, systems), made the one way that keeps decisions linearizable (contract §1.2): in
 * one transaction that first advances the tenant's version (its row lock serialises the
 * tenant's changes), then, once committed, the new snapshot is published before the caller
 * answers. A commit made under the old version is refused by the hot store from then on.
 */
export interface StateChanges {
  apply<T>(tenantId: string, fn: (stores: Stores, stateVersion: number) => Promise<T>): Promise<T>
}

export function createStateChanges(deps: {
  sor: SystemOfRecord
  decisionState: DecisionStateSink
}): StateChanges {
  return {
    async apply(tenantId, fn) {
      const result = await deps.sor.transaction(async (stores) =>
        fn(stores, await stores.tenants.bumpVersion(tenantId)),
      )
      await deps.decisionState.changed(tenantId)
      return result
    },
  }
}
