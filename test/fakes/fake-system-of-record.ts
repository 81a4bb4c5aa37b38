import type { Stores, SystemOfRecord } from '../../src/store/ports/index.js'
import { createFakeActionStore } from './fake-action-store.js'
import { createFakeBadgeTokenStore } from './fake-badge-token-store.js'
import { type FakeContext, type FakeDatabase, Journal } from './fake-database.js'
import { createFakeGrantStore } from './fake-grant-store.js'
import { createFakeInviteStore } from './fake-invite-store.js'
import { createFakeKeyStore } from './fake-key-store.js'
import { createFakeLeaseStore } from './fake-lease-store.js'
import { createFakePolicyStore } from './fake-policy-store.js'
import { createFakePortalSessionStore } from './fake-portal-session-store.js'
import { createFakePrincipalStore } from './fake-principal-store.js'
import { createFakeReceiptStore } from './fake-receipt-store.js'
import { createFakeRosterStore } from './fake-roster-store.js'
import { createFakeSandboxGrantStore } from './fake-sandbox-grant-store.js'
import { createFakeSystemStore } from './fake-system-store.js'
import { createFakeTenantStore } from './fake-tenant-store.js'
import { createFakeTotpStore } from './fake-totp-store.js'
import { createFakeVerbStore } from './fake-verb-store.js'

function fakeStores(ctx: FakeContext): Stores {
  return {
    tenants: createFakeTenantStore(ctx),
    principals: createFakePrincipalStore(ctx),
    keys: createFakeKeyStore(ctx),
    invites: createFakeInviteStore(ctx),
    totp: createFakeTotpStore(ctx),
    receipts: createFakeReceiptStore(ctx),
    policies: createFakePolicyStore(ctx),
    verbs: createFakeVerbStore(ctx),
    grants: createFakeGrantStore(ctx),
    roster: createFakeRosterStore(ctx),
    leases: createFakeLeaseStore(ctx),
    actions: createFakeActionStore(ctx),
    sandbox: createFakeSandboxGrantStore(ctx),
    badgeTokens: createFakeBadgeTokenStore(ctx),
    systems: createFakeSystemStore(ctx),
    portalSessions: createFakePortalSessionStore(ctx),
  }
}

/**
 * The system of record over fake tables. A transaction's stores log how to undo each change;
 * when its function throws, the log is replayed backwards and the error passes through, as a
 * rolled-back Postgres transaction would leave things.
 */
export function createFakeSystemOfRecord(db: FakeDatabase): SystemOfRecord {
  return {
    stores: fakeStores({ db, tx: null }),
    async transaction(fn) {
      const journal = new Journal()
      let result: Awaited<ReturnType<typeof fn>>
      try {
        result = await fn(fakeStores({ db, tx: journal }))
      } catch (err) {
        journal.rollback()
        throw err
      }
      journal.commit()
      return result
    },
  }
}
