#!/usr/bin/env node
import { randomBytes } from 'node:crypto'
import { writeFileSync } from 'node:fs'
import { ConfigError, loadSettings } from '../config/load.js'
import { createControlPlane, openConfiguredDatabase } from '../control/control-plane.js'
import { createInjector } from '../injector/injector-process.js'
import { createLogger, type Logger } from '../observability/logger.js'
import { startMetricsServer } from '../observability/metrics-server.js'
import { startProxy, startProxyProcess } from '../proxy/proxy-process.js'
import { migrate } from '../store/migrate.js'
import { databaseTarget } from '../store/postgres/connect.js'
import { VERSION } from '../version.js'
import { auditKeygenCommand } from './audit-keygen.js'
import { manifestsImportCommand } from './manifests-import.js'
import { verifyCommand } from './verify-export.js'

const USAGE = `writegate ${VERSION}

Usage: writegate <command>

Commands:
  start             run the control plane (REST API, audit log); without Redis, the proxy too
  proxy             run gate-proxy, the sidecar that gates an agent's writes (needs Redis)
  migrate           apply database migrations and exit
  injector          run the Kubernetes admission webhook that injects gate-proxy (HTTPS)
  keygen <file>     write a new 32-byte master key (for secrets.masterKeyFile)
  audit-keygen <file>
                    write a new Ed25519 checkpoint signing key (for audit.signingKeyFile)
                    and its public key to <file>.pub
  verify <export.jsonl> --public-key <file>
                    verify an exported audit log offline (exit 0 valid, 1 invalid)
  manifests import <file>
                    import a scanner's signed manifest file (manifests.scannerPublicKeyFile)
  help              show this text

Settings come from config/writegate.yaml (or WRITEGATE_CONFIG) with WRITEGATE_* overrides.`

/** Start-up failures print one line naming the problem, then exit non-zero. */
function die(message: string): never {
  process.stderr.write(`writegate: ${message}\n`)
  process.exit(1)
}

function describeStartupError(err: unknown): string {
  if (err instanceof ConfigError) return err.message
  const e = err as NodeJS.ErrnoException & { address?: string; port?: number }
  if (e.code === 'EADDRINUSE')
    return `cannot listen on ${e.address}:${e.port}: address in use (server.port / WRITEGATE_PORT)`
  if (e.code === 'ECONNREFUSED' || e.code === 'ENOTFOUND' || e.code === 'ETIMEDOUT') {
    return `cannot reach a backing server (${e.code}${e.address ? ` ${e.address}:${e.port}` : ''}); check database.url (WRITEGATE_DATABASE_URL) and redis.url (WRITEGATE_REDIS_URL)`
  }
  return (e?.message ?? String(err)).split('\n')[0] ?? 'start-up failed'
}

/** Keeps the process up until SIGTERM or SIGINT, then closes cleanly. */
function untilSignal(logger: Logger, close: () => Promise<void>): void {
  let stopping = false
  const stop = async (signal: string) => {
    if (stopping) return
    stopping = true
    logger.info({ signal }, 'shutting down')
    await close()
    process.exit(0)
  }
  process.on('SIGTERM', () => void stop('SIGTERM'))
  process.on('SIGINT', () => void stop('SIGINT'))
}

/** What a port clash names: the setting that chose the port. */
async function listening<T>(setting: string, host: string, port: number, fn: () => Promise<T>): Promise<T> {
  return fn().catch((err: NodeJS.ErrnoException) => {
    if (err.code !== 'EADDRINUSE') throw err
    throw new ConfigError(`invalid setting ${setting}: ${host}:${port} is in use`)
  })
}

async function start(): Promise<void> {
  const settings = loadSettings()
  const cp = await createControlPlane(settings)
  const address = await listening(
    'server.port (WRITEGATE_PORT)',
    settings.server.host,
    settings.server.port,
    () => cp.listen(),
  )
  const embedded = !settings.redis.url
  // The single-process default runs the proxy too, over the same in-memory hot store.
  const proxy = embedded
    ? await listening('proxy.port (WRITEGATE_PROXY_PORT)', settings.proxy.host, settings.proxy.port, () =>
        startProxy(settings, cp, { metricsServer: false }),
      )
    : null
  const metrics = await listening(
    'metrics.port (WRITEGATE_METRICS_PORT)',
    settings.metrics.host,
    settings.metrics.port,
    () => startMetricsServer(cp.metrics.registry, settings.metrics.host, settings.metrics.port),
  )
  cp.logger.info(
    {
      address,
      proxyPort: proxy?.port ?? null,
      metricsPort: metrics.port,
      storage: cp.database.kind,
      hotStore: embedded ? 'memory' : 'redis',
    },
    'writegate control plane listening',
  )
  untilSignal(cp.logger, async () => {
    await proxy?.close()
    await metrics.close()
    await cp.close()
  })
}

async function runProxy(): Promise<void> {
  const settings = loadSettings()
  const logger = createLogger(settings.log.level)
  const running = await listening(
    'proxy.port (WRITEGATE_PROXY_PORT)',
    settings.proxy.host,
    settings.proxy.port,
    () => startProxyProcess(settings, { logger }),
  )
  logger.info({ port: running.port, metricsPort: running.metricsPort }, 'writegate gate-proxy listening')
  untilSignal(logger, () => running.close())
}

async function runInjector(): Promise<void> {
  const settings = loadSettings()
  const injector = createInjector(settings)
  const address = await listening(
    'injector.port (WRITEGATE_INJECTOR_PORT)',
    settings.injector.host,
    settings.injector.port,
    () => injector.listen(),
  )
  injector.logger.info({ address: `${address.address}:${address.port}` }, 'writegate injector listening')
  untilSignal(injector.logger, () => injector.close())
}

async function runMigrate(): Promise<void> {
  const settings = loadSettings()
  const logger = createLogger(settings.log.level)
  const db = await openConfiguredDatabase(databaseTarget(settings.database.url, settings.dataDir, 1))
  try {
    const result = await migrate(db.sql)
    logger.info({ applied: result.applied, current: result.current, storage: db.kind }, 'migrations applied')
  } finally {
    await db.close()
  }
}

function keygen(file: string | undefined): void {
  if (!file) die('keygen needs an output file: writegate keygen <file>')
  writeFileSync(file, `${randomBytes(32).toString('base64')}\n`, { mode: 0o600, flag: 'wx' })
  process.stdout.write(`wrote a new master key to ${file}\n`)
}

async function main(argv: string[]): Promise<void> {
  const [command, ...rest] = argv
  switch (command) {
    case 'start':
      return start()
    case 'migrate':
      return runMigrate()
    case 'proxy':
      return runProxy()
    case 'injector':
      return runInjector()
    case 'keygen':
      return keygen(rest[0])
    case 'audit-keygen':
      return auditKeygenCommand(rest[0], (s) => process.stdout.write(s))
    case 'verify': {
      const io = {
        stdout: (s: string) => process.stdout.write(s),
        stderr: (s: string) => process.stderr.write(s),
        stderrIsTty: process.stderr.isTTY === true,
      }
      process.exitCode = await verifyCommand(rest, io)
      return
    }
    case 'manifests':
      if (rest[0] !== 'import') die('usage: writegate manifests import <file>')
      return manifestsImportCommand(rest[1], (s) => process.stdout.write(s))
    case undefined:
    case 'help':
    case '--help':
    case '-h':
      process.stdout.write(`${USAGE}\n`)
      return
    case '--version':
      process.stdout.write(`${VERSION}\n`)
      return
    default:
      die(`unknown command "${command}" (try: writegate help)`)
  }
}

main(process.argv.slice(2)).catch((err) => die(describeStartupError(err)))
