import { generateKeyPairSync, type KeyObject, randomBytes } from 'node:crypto'
import type { LookupFunction } from 'node:net'
import type { Test } from 'tap'
import { parseSettings } from '../../src/config/load.js'
import type { Settings } from '../../src/config/schema.js'
import type { SystemsFile } from '../../src/config/systems.js'
import { type ControlPlane, createControlPlane } from '../../src/control/control-plane.js'
import { type Clock, ManualClock } from '../../src/core/clock.js'
import { createLogger, type Logger } from '../../src/observability/logger.js'
import type { Keyring } from '../../src/security/keyring.js'
import { deriveKeyring } from '../../src/security/keyring.js'
import type { HotStore } from '../../src/store/ports/hot-store.js'
import type { Storage } from '../../src/store/ports/storage.js'
import type { DatabaseKind } from '../../src/store/postgres/connect.js'
import { createFakeStorage } from '../fakes/fake-storage.js'
import { openTestDatabase, type TestDatabase } from './backends.js'

/**
 * What a test control plane keeps its state in: a real database of the given kind, or `fake`, the
 * in-memory fake stores (test/fakes) for service tests that only talk to the API. The contract
 * suites hold the fakes to the real adapters' behaviour.
 */
export type TestStorageKind = DatabaseKind | 'fake'

export interface TestControlPlane<K extends TestStorageKind = TestStorageKind> {
  cp: ControlPlane
  /** The real database; null on the fakes. */
  db: K extends 'fake' ? null : TestDatabase
  clock: Clock
  api: Api
}

export interface StartOptions {
  settings?: Record<string, unknown>
  clock?: Clock
  /** Reuse a database (a second instance on the same Postgres, say). */
  db?: TestDatabase
  /** Reuse fake storage (a second instance over the same fakes). */
  storage?: Storage
  systems?: SystemsFile
  hot?: HotStore
  keyring?: Keyring
  /** Replicas of one deployment share the checkpoint signing key; by default each test gets its own. */
  auditSigningKey?: KeyObject
  /** A logger to read back (see `capturingLogger`); by default logs are silent. */
  logger?: Logger
  /** How host names resolve: the tests' names point where a test says, not where DNS does. */
  addressesOf?: (host: string) => Promise<string[]>
  /** How upstream names resolve when execute and approvals connect (a rebinding name, say). */
  lookup?: LookupFunction
}

/**
 * scrypt's cost for the backup codes of test tenants: 2^10, a sixteenth of the default. Tests make
 * hundreds of tenants, and at the default each cost 0.4 s of CPU; what the codes do is the same.
 * backup-codes.test.ts checks the default a control plane uses without this override.
 */
export const TEST_BACKUP_CODE_COST = 10

/** Settings for tests: quiet logs, and issuance limits high enough not to trip unrelated tests. */
export function testSettings(extra: Record<string, unknown> = {}): Settings {
  return parseSettings({ log: { level: 'silent' }, issuance: { perIpPerHour: 100000 }, ...extra })
}

export async function startControlPlane<K extends TestStorageKind>(
  t: Test,
  kind: K,
  opts: StartOptions = {},
): Promise<TestControlPlane<K>> {
  const db = kind === 'fake' ? null : (opts.db ?? (await openTestDatabase(kind)))
  const settings = testSettings(opts.settings)
  const clock = opts.clock ?? new ManualClock(Date.UTC(2026, 10, 21, 12, 0, 0))
  const cp = await createControlPlane(settings, {
    ...(db ? { database: db.db } : { storage: opts.storage ?? createFakeStorage() }),
    clock,
    keyring: opts.keyring ?? deriveKeyring(randomBytes(32)),
    logger: opts.logger ?? createLogger(settings.log.level),
    ...(opts.systems ? { systems: opts.systems } : {}),
    ...(opts.hot ? { hot: opts.hot } : {}),
    ...(opts.addressesOf ? { addressesOf: opts.addressesOf } : {}),
    ...(opts.lookup ? { lookup: opts.lookup } : {}),
    auditSigningKey: opts.auditSigningKey ?? generateKeyPairSync('ed25519').privateKey,
    backupCodeCost: TEST_BACKUP_CODE_COST,
  })
  t.teardown(async () => {
    await cp.close()
    if (db && !opts.db) await db.close()
  })
  return { cp, db: db as TestControlPlane<K>['db'], clock, api: new Api(cp) }
}

/**
 * Enrolled systems name their tenant, and tenant ids are random: create the tenant on a
 * first instance, then serve it from a second instance (same database) that enrols
 * `systemsFor(tenantId)`.
 */
export async function startWithTenantSystems(
  t: Test,
  kind: TestStorageKind,
  systemsFor: (tenantId: string) => SystemsFile,
  opts: StartOptions = {},
) {
  const db = kind === 'fake' ? null : (opts.db ?? (await openTestDatabase(kind)))
  if (db && !opts.db) t.teardown(() => db.close())
  const storage = kind === 'fake' ? (opts.storage ?? createFakeStorage()) : undefined
  const keyring = deriveKeyring(randomBytes(32))
  const clock = opts.clock ?? new ManualClock(Date.UTC(2026, 10, 21, 12, 0, 0))
  const auditSigningKey = opts.auditSigningKey ?? generateKeyPairSync('ed25519').privateKey
  const first = await createControlPlane(testSettings(opts.settings), {
    ...(db ? { database: db.db } : { storage }),
    clock,
    keyring,
    logger: createLogger('silent'),
    auditSigningKey,
    backupCodeCost: TEST_BACKUP_CODE_COST,
  })
  const tenant = await new Api(first).newTenant()
  await first.close()
  const second = await startControlPlane(t, kind, {
    ...opts,
    auditSigningKey,
    ...(db ? { db } : {}),
    ...(storage ? { storage } : {}),
    clock,
    keyring,
    systems: systemsFor(tenant.tenantId),
  })
  return { ...second, tenant }
}

export interface Reply<T = Record<string, unknown>> {
  status: number
  body: T
  headers: Record<string, string | string[] | number | undefined>
}

export interface CallOptions {
  bearer?: string
  headers?: Record<string, string>
  remoteAddress?: string
  /** Send this exact payload (text, or bytes) instead of JSON-encoding `body`. */
  raw?: string | Buffer
}

/** A black-box HTTP client over fastify's inject (no port needed). */
export class Api {
  constructor(private readonly cp: ControlPlane) {}

  // biome-ignore lint/suspicious/noExplicitAny: test responses are inspected loosely
  async call<T = any>(
    method: string,
    url: string,
    body?: unknown,
    opts: CallOptions = {},
  ): Promise<Reply<T>> {
    const headers: Record<string, string> = { ...(opts.headers ?? {}) }
    if (opts.bearer) headers.authorization = `Bearer ${opts.bearer}`
    let payload: string | Buffer | undefined
    if (opts.raw !== undefined) payload = opts.raw
    else if (body !== undefined) payload = JSON.stringify(body)
    if (payload !== undefined && !Object.keys(headers).some((h) => h.toLowerCase() === 'content-type')) {
      headers['content-type'] = 'application/json'
    }
    const res = await this.cp.app.inject({
      method: method as 'GET',
      url,
      headers,
      ...(payload !== undefined ? { payload } : {}),
      remoteAddress: opts.remoteAddress ?? '127.0.0.1',
    })
    let parsed: unknown = res.body
    if ((res.headers['content-type'] ?? '').toString().includes('json') && res.body)
      parsed = JSON.parse(res.body)
    return { status: res.statusCode, body: parsed as T, headers: res.headers }
  }

  // biome-ignore lint/suspicious/noExplicitAny: see call
  get<T = any>(url: string, opts?: CallOptions) {
    return this.call<T>('GET', url, undefined, opts)
  }
  // biome-ignore lint/suspicious/noExplicitAny: see call
  post<T = any>(url: string, body?: unknown, opts?: CallOptions) {
    return this.call<T>('POST', url, body, opts)
  }
  // biome-ignore lint/suspicious/noExplicitAny: see call
  put<T = any>(url: string, body?: unknown, opts?: CallOptions) {
    return this.call<T>('PUT', url, body, opts)
  }
  // biome-ignore lint/suspicious/noExplicitAny: see call
  patch<T = any>(url: string, body?: unknown, opts?: CallOptions) {
    return this.call<T>('PATCH', url, body, opts)
  }
  // biome-ignore lint/suspicious/noExplicitAny: see call
  delete<T = any>(url: string, opts?: CallOptions) {
    return this.call<T>('DELETE', url, undefined, opts)
  }

  /** A new tenant: its first admin key, sponsor token and TOTP enrolment. */
  async newTenant(
    email = `user-${randomBytes(6).toString('hex')}@example.com`,
    extra: Record<string, unknown> = {},
  ) {
    const r = await this.post('/v1/keys', { email, ...extra })
    if (r.status !== 201) throw new Error(`newTenant: ${r.status} ${JSON.stringify(r.body)}`)
    return {
      ...(r.body as {
        apiKey: string
        keyId: string
        tenantId: string
        principalId: string
        sponsorToken: string
        totp: { secret: string; backupCodes: string[] }
      }),
      email,
    }
  }
}

/**
 * Every receipt of the tenant in seq order, as stored (its hashed body, parsed), read through the
 * control plane's storage: the same on a real database and on the fakes.
 */
// biome-ignore lint/suspicious/noExplicitAny: receipts are inspected loosely, as parsed JSON
export async function storedReceipts(cp: ControlPlane, tenantId: string): Promise<any[]> {
  const reader = cp.storage.receipts
  const head = await reader.head(tenantId)
  const rows = await reader.rows(tenantId, 0, head.seq, Number.MAX_SAFE_INTEGER)
  return rows.map((r) => JSON.parse(r.body))
}
