import type { Clock } from '../core/clock.js'
import { nowSeconds } from '../core/clock.js'
import { newId } from '../core/ids.js'
import { SANDBOX_VERB } from '../core/verbs.js'
import type { SystemOfRecord } from '../store/ports/index.js'

export const SANDBOX_TTL_SECONDS = 90

/**
 * The keyless sandbox mints short demo grants for `demo_write` on `demo-…` targets. They
 * belong to no tenant and approve nothing in a tenant's checks: a safe way to see the shape.
 */
export function createSandboxService(deps: { sor: SystemOfRecord; clock: Clock }) {
  return {
    async mint(target: string) {
      const at = nowSeconds(deps.clock)
      const grantId = newId('grant')
      await deps.sor.stores.sandbox.insert({
        grantId,
        verb: SANDBOX_VERB,
        target,
        createdAt: at,
        expiresAt: at + SANDBOX_TTL_SECONDS,
      })
      await deps.sor.stores.sandbox.pruneExpired(at)
      return {
        grantId,
        verb: SANDBOX_VERB,
        target,
        expiresAt: at + SANDBOX_TTL_SECONDS,
        ttlSeconds: SANDBOX_TTL_SECONDS,
      }
    },
  }
}

export type SandboxService = ReturnType<typeof createSandboxService>
