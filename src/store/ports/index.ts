import type { ReceiptStore } from './audit.js'
import type { BadgeTokenStore } from './badge-tokens.js'
import type {
  ActionStore,
  GrantStore,
  LeaseStore,
  PolicyStore,
  RosterStore,
  SandboxGrantStore,
  VerbStore,
} from './decision-state.js'
import type { InviteStore, KeyStore, PrincipalStore, TenantStore, TotpStore } from './identity.js'
import type { PortalSessionStore } from './portal-sessions.js'
import type { SystemStore } from './systems.js'

export type * from './audit.js'
export type * from './decision-state.js'
export type * from './identity.js'
export type * from './portal-sessions.js'
export type * from './systems.js'

/** Every system-of-record store, bound to one connection or transaction. */
export interface Stores {
  tenants: TenantStore
  principals: PrincipalStore
  keys: KeyStore
  invites: InviteStore
  totp: TotpStore
  receipts: ReceiptStore
  policies: PolicyStore
  verbs: VerbStore
  grants: GrantStore
  roster: RosterStore
  leases: LeaseStore
  actions: ActionStore
  sandbox: SandboxGrantStore
  badgeTokens: BadgeTokenStore
  systems: SystemStore
  portalSessions: PortalSessionStore
}

/** The unit of work: plain stores, or stores bound to one transaction. */
export interface SystemOfRecord {
  readonly stores: Stores
  transaction<T>(fn: (stores: Stores) => Promise<T>): Promise<T>
}
