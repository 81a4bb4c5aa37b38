import { type KeyObject, randomBytes } from 'node:crypto'
import type { LookupFunction } from 'node:net'
import { hostname } from 'node:os'
import type { FastifyInstance } from 'fastify'
import { createActionStager } from '../actions/action-stager.js'
import { createApprovalLimiter } from '../actions/approval-limiter.js'
import { createApprovalService } from '../actions/approval-service.js'
import { createStepUpVerifier } from '../actions/step-up-verifier.js'
import { type AuditTrail, createAuditTrail } from '../audit/audit-trail.js'
import { persistDurable } from '../audit/persist-durable.js'
import { createReceiptDrain, type ReceiptDrain } from '../audit/receipt-drain.js'
import { ConfigError } from '../config/load.js'
import type { Settings } from '../config/schema.js'
import { loadSystemsFile, type SystemsFile } from '../config/systems.js'
import { type Clock, nowSeconds, systemClock } from '../core/clock.js'
import { createCheckService } from '../decision/check-service.js'
import { createTokenService } from '../decision/token-service.js'
import { createExecuteService } from '../execute/execute-service.js'
import { createUpstreamClient } from '../execute/upstream-client.js'
import { createDecisionPipeline } from '../gate/decision-pipeline.js'
import type { Gate } from '../gate/gate.js'
import type { GatedWrites } from '../gate/gated-write.js'
import { publishingSink } from '../gate/publishing-sink.js'
import { seedQuotaCounters } from '../gate/quota-seeder.js'
import type { SnapshotCache } from '../gate/snapshot-cache.js'
import { createSnapshotPublisher } from '../gate/snapshot-publisher.js'
import { createStateChanges } from '../gate/state-change.js'
import { createAuthenticator } from '../identity/authenticator.js'
import { createIssuanceService } from '../identity/issuance-service.js'
import { createPrincipalService } from '../identity/principal-service.js'
import { createLogger, type Logger } from '../observability/logger.js'
import { createMetrics, type Metrics } from '../observability/metrics.js'
import { createPolicyService } from '../policy/policy-service.js'
import { createVerbService } from '../policy/verb-service.js'
import { createPortalSessions } from '../portal/portal-sessions.js'
import { createSandboxService } from '../sandbox/sandbox-service.js'
import { resolveAuditSigningKey } from '../security/audit-signing-key.js'
import { deriveKeyring, type Keyring } from '../security/keyring.js'
import { checkMasterKeyOpensSecrets, resolveMasterKey } from '../security/master-key.js'
import { createSponsorService } from '../sponsor/sponsor-service.js'
import { createMemoryHotStore } from '../store/memory/hot-store.js'
import { createMemoryRateLimitStore } from '../store/memory/rate-limit-store.js'
import type { HotStore } from '../store/ports/hot-store.js'
import type { SystemOfRecord } from '../store/ports/index.js'
import type { RateLimitStore } from '../store/ports/rate-limit.js'
import type { Storage } from '../store/ports/storage.js'
import { type Database, databaseTarget } from '../store/postgres/connect.js'
import { createPostgresStorage } from '../store/postgres/storage.js'
import { connectOnce, connectRedis, type RedisClient } from '../store/redis/connect.js'
import { evictionPolicies } from '../store/redis/eviction-policy.js'
import { createRedisHotStore } from '../store/redis/hot-store.js'
import { createRedisRateLimitStore } from '../store/redis/rate-limit-store.js'
import { credentialResolverFor } from '../systems/credential-resolver.js'
import { addressesOf } from '../systems/host-addresses.js'
import { createSystemService, type SystemService } from '../systems/system-service.js'
import { createSystemsRegistry } from '../systems/systems-registry.js'
import { VERSION } from '../version.js'
import { buildControlApp } from './app.js'
import { migrateConfiguredDatabase, openConfiguredDatabase, unreachable } from './configured-database.js'

export interface ControlPlane {
  readonly app: FastifyInstance
  /** Where the control plane keeps everything durably. */
  readonly storage: Storage
  /** The database under `storage`; null when a test handed in storage of its own (fakes). */
  readonly database: Database | null
  readonly hot: HotStore
  readonly gate: Gate
  readonly writes: GatedWrites
  readonly snapshots: SnapshotCache
  readonly metrics: Metrics
  readonly logger: Logger
  readonly clock: Clock
  /** Drains proxy receipts into the audit log; null when the hot store is in process. */
  readonly drain: ReceiptDrain | null
  /** The audit log (append interface) and its read side. */
  readonly auditTrail: AuditTrail
  readonly systems: SystemService
  /** The embedded default's route table file, enrolled for its proxy's tenant (deprecated path). */
  enrolRoutesFile(tenantId: string, file: SystemsFile): Promise<void>
  /** On `host`, by default `server.host`. */
  listen(host?: string): Promise<string>
  close(): Promise<void>
}

/**
 * The deprecated systems file, imported into the tenants it names as if applied: created,
 * updated when it differs, left alone when equal. A system that names no tenant, or a tenant
 * that does not exist, stops start-up with one line naming the file and the system.
 */
async function importSystemsFile(
  sor: SystemOfRecord,
  service: SystemService,
  file: SystemsFile,
  name: string,
  logger: Logger,
): Promise<void> {
  const done: Record<string, string> = {}
  for (const s of file.systems) {
    const { tenantId, ...definition } = s
    const where = `invalid systems file ${name}: system ${s.systemId}`
    if (!tenantId) throw new ConfigError(`${where}: tenantId: required in the control plane's systems file`)
    if (!(await sor.stores.tenants.get(tenantId)))
      throw new ConfigError(`${where}: tenantId: no tenant ${tenantId}`)
    try {
      done[`${tenantId}/${s.systemId}`] = await service.upsert(
        { kind: 'operator', tenantId, source: 'systemsFile' },
        definition,
      )
    } catch (err) {
      throw new ConfigError(`${where}: ${(err as Error).message}`)
    }
  }
  logger.warn(
    { file: name, systems: done },
    'systemsFile (WRITEGATE_SYSTEMS_FILE) is deprecated and will be removed in the next release: its systems were enrolled; manage them with /v1/systems or `writegate systems apply`',
  )
}

/** What tests (and nothing else) may hand in instead of building it from settings. */
export interface ControlPlaneOverrides {
  /** An open database (migrated here), instead of the configured one. */
  database?: Database
  /** Storage that is no database at all (the service tests' fakes); wins over `database`. */
  storage?: Storage
  clock?: Clock
  keyring?: Keyring
  logger?: Logger
  systems?: SystemsFile
  hot?: HotStore
  metrics?: Metrics
  auditSigningKey?: KeyObject
  /** How host names resolve (DNS), for the tests' names that must point somewhere given. */
  addressesOf?: (host: string) => Promise<string[]>
  /** How upstream names resolve when connecting (execute, approvals), for the tests' rebinding names. */
  lookup?: LookupFunction
  /**
   * scrypt's cost (log2 N) for the backup codes of new tenants. Tests make hundreds of tenants
   * and hand in a cheaper one than the default (2^14, about 40 ms a code); a stored hash names
   * its cost, so codes verify whatever the setting was.
   */
  backupCodeCost?: number
}

/**
 * The control plane's composition root: every dependency is built here, by hand, from
 * validated settings, and handed down. Nothing below holds a module-level connection.
 */
export async function createControlPlane(
  settings: Settings,
  overrides: ControlPlaneOverrides = {},
): Promise<ControlPlane> {
  const logger = overrides.logger ?? createLogger(settings.log.level)
  const clock = overrides.clock ?? systemClock
  const target = databaseTarget(settings.database.url, settings.dataDir, settings.database.maxConnections)
  // The configured key is checked against the sealed secrets once the database is open; a
  // test's keyring is its own (and a second instance on a test's database may bring another).
  const masterKey = overrides.keyring
    ? null
    : resolveMasterKey(settings.secrets.masterKeyFile, target, settings.dataDir)
  const keyring = masterKey ? deriveKeyring(masterKey.key) : (overrides.keyring as Keyring)
  const auditSigningKey =
    overrides.auditSigningKey ??
    resolveAuditSigningKey(settings.audit.signingKeyFile, target, settings.dataDir)
  // Deprecated files: imported into the tenants they name once the database is open.
  const systemsFile =
    overrides.systems ??
    (settings.systemsFile
      ? loadSystemsFile(settings.systemsFile, 'systemsFile (WRITEGATE_SYSTEMS_FILE)')
      : null)
  // The embedded proxy enrols its route table for its tenant; approvals here inject the same credentials.
  const routesFile =
    !settings.redis.url && settings.proxy.routesFile
      ? loadSystemsFile(settings.proxy.routesFile, 'proxy.routesFile (WRITEGATE_ROUTES_FILE)')
      : null
  let routesFileTenant: string | null = null
  const metrics = overrides.metrics ?? createMetrics(settings.redis.url ? 'control-plane' : 'embedded')

  const cleanups: (() => Promise<void>)[] = []
  const closeAll = async () => {
    for (const fn of cleanups.reverse())
      await fn().catch((err) => logger.warn({ err }, 'shutdown step failed'))
    cleanups.length = 0
  }
  try {
    // Redis first: a wrong URL is named at once, before an embedded database's initdb or a
    // long migration has run.
    let rateLimits: RateLimitStore = createMemoryRateLimitStore()
    let hot: HotStore | undefined = overrides.hot
    let redis: RedisClient | undefined
    if (settings.redis.url) {
      const redisOpts = {
        url: settings.redis.url,
        keyPrefix: settings.redis.keyPrefix,
        cluster: settings.redis.mode === 'cluster',
      }
      redis = connectRedis(redisOpts, 'commands', logger)
      const subscriber = connectRedis(redisOpts, 'subscriber', logger)
      cleanups.push(async () => {
        redis?.disconnect()
        subscriber.disconnect()
      })
      await connectOnce(redis).catch((err: Error) => {
        throw unreachable('redis.url (WRITEGATE_REDIS_URL)', err)
      })
      await connectOnce(subscriber).catch((err: Error) => {
        throw unreachable('redis.url (WRITEGATE_REDIS_URL)', err)
      })
      // The proxies share this server: one that may evict keys is refused here, at start-up.
      const evicting = await evictionPolicies(redis).catch((err: Error) => {
        logger.warn(
          { err },
          'Redis: its eviction policy could not be read (INFO); make sure it is noeviction',
        )
        return []
      })
      if (evicting.length > 0)
        throw new ConfigError(
          `invalid setting redis.url (WRITEGATE_REDIS_URL): the server's maxmemory-policy is ${evicting[0]}; writegate needs noeviction (an evicted grant marker or quota counter would let a single-use grant be used twice, an evicted stream would lose receipts)`,
        )
      rateLimits = createRedisRateLimitStore(redis, settings.redis.keyPrefix)
      if (!hot) {
        const redisHot = createRedisHotStore({
          redis,
          subscriber,
          keyPrefix: settings.redis.keyPrefix,
          nowSeconds: () => nowSeconds(clock),
        })
        // Closed before its connections are, whatever fails after this.
        cleanups.push(() => redisHot.close())
        hot = redisHot
      }
    }
    let database: Database | null = null
    if (!overrides.storage) {
      const opened = overrides.database ?? (await openConfiguredDatabase(target))
      if (!overrides.database) cleanups.push(() => opened.close())
      await migrateConfiguredDatabase(opened, target)
      // Armed once migrated: a migration may rightly wait on another replica's lock.
      opened.watchReplies((info) =>
        logger.warn(info, 'database: a reply is overdue; its connection is cut and its requests failed'),
      )
      database = opened
    }
    const storage = overrides.storage ?? createPostgresStorage(database as Database)
    const sor = storage.sor
    // Another master key than the one that sealed the stored TOTP secrets stops start-up here,
    // not at the first approval (every code would fail against it).
    if (masterKey) await checkMasterKeyOpensSecrets(keyring, masterKey, sor.stores.totp)
    const auditTrail = createAuditTrail({
      storage,
      signingKey: auditSigningKey,
      clock,
      logger,
      checkpointIntervalMs: settings.audit.checkpointIntervalSeconds * 1000,
      streamKeepaliveMs: settings.audit.streamKeepaliveSeconds * 1000,
      publicUrl: settings.server.publicUrl,
      onAppendPath: (path, receipts) => metrics.auditAppended(path, receipts),
    })
    cleanups.push(() => auditTrail.close())
    const audit = auditTrail.log

    // One process: a proxy's receipts (and staged actions) go straight to Postgres.
    if (!hot) {
      const memoryHot = createMemoryHotStore({
        receiptSink: (payload) => persistDurable(sor, audit, payload),
      })
      cleanups.push(() => memoryHot.close())
      hot = memoryHot
    }

    const hotState = hot
    const publisher = createSnapshotPublisher({
      source: storage.snapshots,
      hot,
      clock,
      logger,
      // The hot store lost (or never had) this tenant: its proxies' key index and its quota
      // floors must be back before any decision lands on the republished snapshot.
      beforeRepublish: async (tenantId, wasMissing) => {
        for (const e of await sor.stores.keys.indexEntries(tenantId))
          await hotState.indexKey(e.secretHash, { tenantId, keyId: e.keyId })
        if (wasMissing)
          await seedQuotaCounters({ receipts: sor.stores.receipts, hot: hotState, clock }, tenantId)
      },
    })
    const { snapshots, gate, writes } = createDecisionPipeline({
      hot,
      clock,
      metrics,
      quotaLimit: settings.quota.checksPerMonth,
      onMissing: (tenantId) => publisher.repair(tenantId),
      auditChain: { sor, log: audit },
    })
    cleanups.push(async () => snapshots.close())
    const published = publishingSink(publisher, hot, logger)
    // This process reads the new state at once (execute, approvals), not when pub/sub arrives.
    const decisionState = {
      async changed(tenantId: string) {
        await published.changed(tenantId)
        snapshots.invalidate(tenantId)
      },
    }
    const changes = createStateChanges({ sor, decisionState })
    const systems = createSystemsRegistry({ snapshots })
    const systemService = createSystemService({
      sor,
      audit,
      clock,
      changes,
      allowPrivateUpstreams: settings.systems.allowPrivateUpstreams ?? !settings.redis.url,
      addressesOf: overrides.addressesOf ?? addressesOf,
    })

    // Start-up repair: proxies' key index, quota floors and snapshot versions.
    for (const e of await sor.stores.keys.indexEntries())
      await hot.indexKey(e.secretHash, { tenantId: e.tenantId, keyId: e.keyId })
    await seedQuotaCounters({ receipts: sor.stores.receipts, hot, clock })
    await publisher.reconcile()
    publisher.start(settings.hotStore.reconcileIntervalMs)
    cleanups.push(async () => publisher.stop())
    if (systemsFile)
      await importSystemsFile(sor, systemService, systemsFile, settings.systemsFile ?? 'systems', logger)

    let drain: ReceiptDrain | null = null
    if (hot.receiptQueue) {
      drain = createReceiptDrain({
        queue: hot.receiptQueue,
        sor,
        audit,
        logger,
        consumer: `${hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`,
        tenantIds: async () => (await storage.snapshots.versions()).map((v) => v.tenantId),
      })
      const d = drain
      metrics.watchDrainBacklog(() => d.backlog())
      d.start()
      cleanups.push(() => d.stop())
    }

    const auth = createAuthenticator({ stores: sor.stores })
    const stager = createActionStager({ systems, clock })
    // One keep-alive pool per upstream origin, opened on first use.
    const upstream = createUpstreamClient({ settings: settings.execute, lookup: overrides.lookup })
    cleanups.push(() => upstream.close())
    // The embedded routes file's references are its proxy's tenant's, known once it is enrolled.
    const credentials = credentialResolverFor(
      settings.credentials,
      process.env,
      [systemsFile, routesFile],
      () => routesFileTenant,
    )
    const execute = createExecuteService({
      sor,
      audit,
      gate,
      clock,
      keyring,
      systems,
      upstream,
      credentials,
      logger,
    })
    const verifier = createStepUpVerifier({ stores: sor.stores, keyring, clock, audit, logger })
    const services = {
      auditServices: auditTrail.services,
      auditLog: audit,
      sor,
      auth,
      clock,
      rateLimits,
      quota: hot,
      issuance: createIssuanceService({
        sor,
        audit,
        auth,
        keyring,
        clock,
        decisionState,
        keyIndex: hot,
        standing: (tenantId, keyId) => gate.standing(tenantId, keyId),
        logger,
        sameEmail: settings.issuance.sameEmail,
        ...(overrides.backupCodeCost ? { backupCodeCost: overrides.backupCodeCost } : {}),
      }),
      principals: createPrincipalService({ sor, audit, clock, changes }),
      policies: createPolicyService({ sor, audit, clock, changes }),
      verbs: createVerbService({ sor, audit, clock, changes }),
      systems: systemService,
      checks: createCheckService({
        writes,
        keyring,
        systems,
        stager,
        allowTtlSeconds: settings.tokens.allowTtlSeconds,
      }),
      tokens: createTokenService({ keyring, clock, gate, sor }),
      sponsor: createSponsorService({ sor, audit, clock, changes }),
      sandbox: createSandboxService({ sor, clock }),
      execute,
      approvals: createApprovalService({
        sor,
        audit,
        gate,
        clock,
        keyring,
        systems,
        stager,
        execute,
        verifier,
        limiter: createApprovalLimiter({ store: rateLimits, clock, limits: settings.approvals }),
        logger,
        allowTtlSeconds: settings.tokens.allowTtlSeconds,
      }),
      portalSessions: settings.portal.enabled
        ? createPortalSessions({
            sor,
            auth,
            audit,
            verifier,
            rateLimits,
            clock,
            limits: settings.portal,
            logger,
          })
        : null,
    }
    const readiness = async () => {
      await storage.ping()
      if (redis) await redis.ping()
    }

    const app = await buildControlApp(services, {
      logger,
      trustProxy: settings.server.trustProxy,
      issuancePerIpPerHour: settings.issuance.perIpPerHour,
      sandboxPerIpPerMinute: settings.sandbox.perIpPerMinute,
      checksPerMonth: settings.quota.checksPerMonth,
      version: VERSION,
      readiness,
      portalSessionMaxSeconds: settings.portal.sessionMaxSeconds,
      handlerDeadlines: {
        defaultMs: settings.server.handlerTimeoutMs,
        upstreamCallMs: settings.execute.deadlineMs,
      },
    })
    cleanups.push(() => app.close())
    return {
      app,
      storage,
      database,
      hot,
      gate,
      writes,
      snapshots,
      metrics,
      logger,
      clock,
      drain,
      auditTrail,
      systems: systemService,
      async enrolRoutesFile(tenantId, file) {
        routesFileTenant = tenantId
        for (const s of file.systems) {
          // A system the file gives to another tenant is not this proxy's to enrol.
          if (s.tenantId !== undefined && s.tenantId !== tenantId) continue
          const { tenantId: _, ...definition } = s
          await systemService.upsert({ kind: 'operator', tenantId, source: 'routesFile' }, definition)
        }
      },
      listen: (host = settings.server.host) => app.listen({ port: settings.server.port, host }),
      close: closeAll,
    }
  } catch (err) {
    await closeAll()
    throw err
  }
}
