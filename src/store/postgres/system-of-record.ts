import type { Stores, SystemOfRecord } from '../ports/index.js'
import type { Database } from './connect.js'
import { createInviteStore } from './invite-store.js'
import { createKeyStore } from './key-store.js'
import { createPrincipalStore } from './principal-store.js'
import { createReceiptStore } from './receipt-store.js'
import type { SqlHandle } from './sql-handle.js'
import { createTenantStore } from './tenant-store.js'
import { createTotpStore } from './totp-store.js'

export function createStores(sql: SqlHandle): Stores {
  return {
    tenants: createTenantStore(sql),
    principals: createPrincipalStore(sql),
    keys: createKeyStore(sql),
    invites: createInviteStore(sql),
    totp: createTotpStore(sql),
    receipts: createReceiptStore(sql),
  }
}

export function createSystemOfRecord(db: Database): SystemOfRecord {
  return {
    stores: createStores(db.sql),
    transaction: (fn) => db.sql.begin((tx) => fn(createStores(tx))) as never,
  }
}
