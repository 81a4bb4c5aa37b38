import type { KeyObject } from 'node:crypto'
import type { FastifyInstance } from 'fastify'
import { type AuditTrail, createAuditTrail } from '../audit/audit-trail.js'
import type { Settings } from '../config/schema.js'
import { type Clock, systemClock } from '../core/clock.js'
import type { DecisionStateSink } from '../gate/decision-state.js'
import { createAuthenticator } from '../identity/authenticator.js'
import { createIssuanceService } from '../identity/issuance-service.js'
import { createPrincipalService } from '../identity/principal-service.js'
import { createLogger, type Logger } from '../observability/logger.js'
import { resolveAuditSigningKey } from '../security/audit-signing-key.js'
import { deriveKeyring, type Keyring } from '../security/keyring.js'
import { resolveMasterKey } from '../security/master-key.js'
import { createMemoryHotStore } from '../store/memory/hot-store.js'
import { createMemoryRateLimitStore } from '../store/memory/rate-limit-store.js'
import { migrate } from '../store/migrate.js'
import { type Database, databaseTarget, openDatabase } from '../store/postgres/connect.js'
import { createSystemOfRecord } from '../store/postgres/system-of-record.js'
import { connectRedis } from '../store/redis/connect.js'
import { createRedisRateLimitStore } from '../store/redis/rate-limit-store.js'
import { VERSION } from '../version.js'
import { buildControlApp } from './app.js'

export interface ControlPlane {
  readonly app: FastifyInstance
  readonly database: Database
  readonly logger: Logger
  /** The audit log (append interface) and its read side. */
  readonly auditTrail: AuditTrail
  listen(): Promise<string>
  close(): Promise<void>
}

/** What tests (and nothing else) may hand in instead of building it from settings. */
export interface ControlPlaneOverrides {
  database?: Database
  clock?: Clock
  keyring?: Keyring
  logger?: Logger
  auditSigningKey?: KeyObject
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
  const keyring =
    overrides.keyring ??
    deriveKeyring(resolveMasterKey(settings.secrets.masterKeyFile, target, settings.dataDir))
  const auditSigningKey =
    overrides.auditSigningKey ??
    resolveAuditSigningKey(settings.audit.signingKeyFile, target, settings.dataDir)

  const cleanups: (() => Promise<void>)[] = []
  const closeAll = async () => {
    for (const fn of cleanups.reverse())
      await fn().catch((err) => logger.warn({ err }, 'shutdown step failed'))
  }
  try {
    const database = overrides.database ?? (await openDatabase(target))
    if (!overrides.database) cleanups.push(() => database.close())
    await migrate(database.sql)

    let rateLimits = createMemoryRateLimitStore()
    if (settings.redis.url) {
      const redis = connectRedis({ url: settings.redis.url, keyPrefix: settings.redis.keyPrefix })
      await redis.connect()
      cleanups.push(async () => {
        await redis.quit()
      })
      rateLimits = createRedisRateLimitStore(redis, settings.redis.keyPrefix)
    }
    const hot = createMemoryHotStore()

    const sor = createSystemOfRecord(database)
    const auditTrail = createAuditTrail({
      database,
      sor,
      signingKey: auditSigningKey,
      clock,
      logger,
      checkpointIntervalMs: settings.audit.checkpointIntervalSeconds * 1000,
      streamKeepaliveMs: settings.audit.streamKeepaliveSeconds * 1000,
      publicUrl: settings.server.publicUrl,
    })
    cleanups.push(() => auditTrail.close())
    const audit = auditTrail.log
    const auth = createAuthenticator({ stores: sor.stores })
    const decisionState: DecisionStateSink = { changed: async () => {} }
    const issuance = createIssuanceService({
      sor,
      audit,
      auth,
      keyring,
      clock,
      decisionState,
      sameEmail: settings.issuance.sameEmail,
    })
    const principals = createPrincipalService({ sor, audit, clock, decisionState })

    const app = await buildControlApp(
      { sor, auth, issuance, principals, rateLimits, quota: hot, clock, auditServices: auditTrail.services },
      {
        logger,
        trustProxy: settings.server.trustProxy,
        issuancePerIpPerHour: settings.issuance.perIpPerHour,
        checksPerMonth: settings.quota.checksPerMonth,
        version: VERSION,
      },
    )
    cleanups.push(() => app.close())
    return {
      app,
      database,
      logger,
      auditTrail,
      listen: () => app.listen({ port: settings.server.port, host: settings.server.host }),
      close: closeAll,
    }
  } catch (err) {
    await closeAll()
    throw err
  }
}
