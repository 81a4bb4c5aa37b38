import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { PGlite } from '@electric-sql/pglite'
import { PGLiteSocketServer } from '@electric-sql/pglite-socket'
import postgres, { type Sql } from 'postgres'
import { makeDirectory } from '../../node-fs/make-directory.js'
import { createReplyWatchdog } from './reply-watchdog.js'

export type DatabaseKind = 'postgres' | 'pglite-disk' | 'pglite-memory'

export type DatabaseTarget =
  | {
      kind: 'postgres'
      url: string
      maxConnections?: number
      /** How long Postgres lets a session of ours sit in a transaction without a statement (tests shorten it). */
      idleInTransactionMs?: number
      /** How long a request may wait for its reply's first byte before its connection is cut (tests shorten it). */
      replyDeadlineMs?: number
    }
  | { kind: 'pglite-disk'; dir: string; initialState?: Blob }
  | { kind: 'pglite-memory'; initialState?: Blob }

/** An open system-of-record connection. `sql` is the `postgres` driver whatever the backend. */
export interface Database {
  readonly kind: DatabaseKind
  readonly sql: Sql
  /** True when other processes may write the same database (so in-process wake-ups are not enough). */
  readonly shared: boolean
  /**
   * From now on a server connection whose reply is overdue is cut (`reply-watchdog.ts`), and
   * `onCut` told; the embedded engine has no network to lose, so PGlite ignores it.
   */
  watchReplies(onCut: (info: { overdueMs: number; outstanding: number }) => void): void
  close(): Promise<void>
}

/** Chooses the backend from settings: a URL wins; `memory://` is in-memory PGlite; otherwise PGlite under dataDir. */
export function databaseTarget(
  url: string | undefined,
  dataDir: string,
  maxConnections = 10,
): DatabaseTarget {
  if (url === 'memory://') return { kind: 'pglite-memory' }
  if (url) return { kind: 'postgres', url, maxConnections }
  return { kind: 'pglite-disk', dir: join(resolve(dataDir), 'pgdata') }
}

/** BIGINT columns (seq, timestamps, versions) stay well inside 2^53, so they are read as numbers. */
const int8AsNumber = {
  to: 20,
  from: [20],
  serialize: (x: number) => String(x),
  parse: (x: string) => Number(x),
}

const PLAN_CACHE_MODE = 'force_custom_plan'

/**
 * Our transactions send their statements back to back (milliseconds). One left open by a
 * process that froze or lost its network keeps its row locks (a tenant's audit head among
 * them, which every append of that tenant waits for) until Postgres notices the client is
 * gone: with its default keepalives, hours. Postgres ends such a session after this long.
 */
const IDLE_IN_TRANSACTION_MS = 30_000

const driverOptions = {
  onnotice: () => {},
  // The driver prepares every statement, and after five runs Postgres may keep a generic
  // plan for the life of the connection. One made while a table was small (a new tenant, a
  // fresh install) stays a sequential scan as the table grows: the receipt append's
  // duplicate check scanned the whole audit log on every batch. Custom plans see the
  // table's current size each time, for a few tens of microseconds of planning.
  connection: { plan_cache_mode: PLAN_CACHE_MODE },
  types: { int8: int8AsNumber },
  transform: { undefined: null },
}

export async function openDatabase(target: DatabaseTarget): Promise<Database> {
  if (target.kind === 'postgres') {
    const watchdog = createReplyWatchdog(target.replyDeadlineMs)
    const sql = postgres(target.url, {
      ...driverOptions,
      // A documented option its types leave out (postgres.js README, "Custom socket").
      ...({ socket: watchdog.socket } as object),
      connection: {
        ...driverOptions.connection,
        idle_in_transaction_session_timeout: target.idleInTransactionMs ?? IDLE_IN_TRANSACTION_MS,
      },
      max: target.maxConnections ?? 10,
      connect_timeout: 10,
      idle_timeout: 30,
    })
    // Fail at start rather than at the first request.
    await sql`select 1`.catch((err) => {
      watchdog.close()
      throw err
    })
    return {
      kind: 'postgres',
      sql,
      shared: true,
      watchReplies: (onCut) => watchdog.arm(onCut),
      close: () => {
        watchdog.close()
        return sql.end({ timeout: 5 })
      },
    }
  }
  return openPglite(target)
}

/**
 * PGlite is a single-connection engine. It is served on a private unix socket (in a
 * 0700 temp directory) and reached through the same `postgres` driver as a real
 * server, with one connection, so there is exactly one SQL code path.
 */
async function openPglite(target: Exclude<DatabaseTarget, { kind: 'postgres' }>): Promise<Database> {
  let releaseLock = () => {}
  if (target.kind === 'pglite-disk') {
    makeDirectory(target.dir, 0o700)
    releaseLock = acquireDirLock(target.dir)
  }
  let db: PGlite | undefined
  try {
    // A fresh cluster is created by initdb (seconds under WASM); `initialState`, a data directory
    // dumped from a fresh cluster, skips it. The tests use one; a new directory is initdb'd.
    const fresh = target.kind === 'pglite-memory' || !existsSync(join(target.dir, 'PG_VERSION'))
    const loadDataDir = fresh ? target.initialState : undefined
    db = await PGlite.create(
      target.kind === 'pglite-disk' ? target.dir : 'memory://',
      loadDataDir ? { loadDataDir } : {},
    )
    const pg = db
    return await servePglite(pg, target.kind, async () => {
      await pg.close()
      releaseLock()
    })
  } catch (err) {
    await db?.close().catch(() => {})
    releaseLock()
    throw err
  }
}

/**
 * An open PGlite engine as a Database: served on a private socket, one driver connection.
 * Closing it closes the driver and the socket, then calls `release` (which closes the engine,
 * except in the tests, which reuse engines).
 */
export async function servePglite(
  db: PGlite,
  kind: Exclude<DatabaseKind, 'postgres'>,
  release: () => Promise<void>,
): Promise<Database> {
  let server: PGLiteSocketServer | undefined
  const sockDir = mkdtempSync(join(tmpdir(), 'writegate-pglite-'))
  try {
    // PGlite is one session, and its socket ignores start-up parameters: set it here instead.
    await db.exec(`set plan_cache_mode = ${PLAN_CACHE_MODE}`)
    const path = join(sockDir, '.s.PGSQL.5432')
    server = new PGLiteSocketServer({ db, path })
    await server.start()
    const sql = postgres({
      ...driverOptions,
      path,
      database: 'postgres',
      username: 'postgres',
      max: 1,
    })
    await sql`select 1`
    const srv = server
    return {
      kind,
      sql,
      shared: false,
      watchReplies: () => {},
      async close() {
        await sql.end({ timeout: 5 })
        await srv.stop()
        rmSync(sockDir, { recursive: true, force: true })
        await release()
      },
    }
  } catch (err) {
    await server?.stop().catch(() => {})
    rmSync(sockDir, { recursive: true, force: true })
    throw err
  }
}

/** Two processes on one PGlite directory would corrupt it; a pid lock file refuses the second. */
function acquireDirLock(dir: string): () => void {
  const lockFile = join(dir, 'writegate.lock')
  try {
    const pid = Number(readFileSync(lockFile, 'utf8'))
    if (Number.isInteger(pid) && pid !== process.pid && isAlive(pid)) {
      throw new Error(`data directory ${dir} is in use by process ${pid}`)
    }
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err
  }
  writeFileSync(lockFile, String(process.pid), { mode: 0o600 })
  return () => rmSync(lockFile, { force: true })
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM'
  }
}
