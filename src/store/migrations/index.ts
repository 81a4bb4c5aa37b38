import * as m0001 from './0001-identity.js'
import * as m0002 from './0002-decision-state.js'
import * as m0003 from './0003-audit.js'
import * as m0004 from './0004-actions.js'
import * as m0005 from './0005-systems.js'
import * as m0006 from './0006-portal-sessions.js'
import * as m0007 from './0007-standing-history.js'
import * as m0008 from './0008-action-system-version.js'
import * as m0009 from './0009-invite-issuer.js'
import * as m0010 from './0010-totp-wrong-codes.js'
import * as m0011 from './0011-totp-wrong-code-bucket.js'

export interface Migration {
  readonly version: number
  readonly name: string
  readonly up: string
}

/** Every migration, in order. Applied versions are recorded in schema_migrations and never re-run. */
export const MIGRATIONS: readonly Migration[] = [
  { version: 1, name: 'identity', up: m0001.up },
  { version: 2, name: 'decision-state', up: m0002.up },
  { version: 3, name: 'audit', up: m0003.up },
  { version: 4, name: 'actions', up: m0004.up },
  { version: 5, name: 'systems', up: m0005.up },
  { version: 6, name: 'portal-sessions', up: m0006.up },
  { version: 7, name: 'standing-history', up: m0007.up },
  { version: 8, name: 'action-system-version', up: m0008.up },
  { version: 9, name: 'invite-issuer', up: m0009.up },
  { version: 10, name: 'totp-wrong-codes', up: m0010.up },
  { version: 11, name: 'totp-wrong-code-bucket', up: m0011.up },
]
