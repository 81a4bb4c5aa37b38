import type { Stores, SystemOfRecord } from '../ports/index.js'
import { createActionStore } from './action-store.js'
import { createBadgeTokenStore } from './badge-token-store.js'
import type { Database } from './connect.js'
import { createGrantStore } from './grant-store.js'
import { createInviteStore } from './invite-store.js'
import { createKeyStore } from './key-store.js'
import { createLeaseStore } from './lease-store.js'
import { createPolicyStore } from './policy-store.js'
import { createPortalSessionStore } from './portal-session-store.js'
import { createPrincipalStore } from './principal-store.js'
import { createReceiptStore } from './receipt-store.js'
import { createRosterStore } from './roster-store.js'
import { createSandboxGrantStore } from './sandbox-grant-store.js'
import type { SqlHandle } from './sql-handle.js'
import { createSystemStore } from './system-store.js'
import { createTenantStore } from './tenant-store.js'
import { createTotpStore } from './totp-store.js'
import { createVerbStore } from './verb-store.js'

export function createStores(sql: SqlHandle): Stores {
  return {
    tenants: createTenantStore(sql),
    principals: createPrincipalStore(sql),
    keys: createKeyStore(sql),
    invites: createInviteStore(sql),
    totp: createTotpStore(sql),
    receipts: createReceiptStore(sql),
    policies: createPolicyStore(sql),
    verbs: createVerbStore(sql),
    grants: createGrantStore(sql),
    roster: createRosterStore(sql),
    leases: createLeaseStore(sql),
    actions: createActionStore(sql),
    sandbox: createSandboxGrantStore(sql),
    badgeTokens: createBadgeTokenStore(sql),
    systems: createSystemStore(sql),
    portalSessions: createPortalSessionStore(sql),
  }
}

export function createSystemOfRecord(db: Database): SystemOfRecord {
  return {
    stores: createStores(db.sql),
    transaction: (fn) => db.sql.begin((tx) => fn(createStores(tx))) as never,
  }
}
