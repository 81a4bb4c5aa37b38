/**
 * Audit append throughput on real Postgres: the group-committing log against one
 * transaction per append, in the same run, with concurrent appenders.
 *
 *   npx tsx bench/audit.ts            (WRITEGATE_BENCH_DATABASE_URL, default postgres://postgres@127.0.0.1:5432/test)
 *   BENCH_SECONDS=5 BENCH_CONCURRENCY=64 npx tsx bench/audit.ts
 *
 * Creates a scratch database, drops it afterwards, and prints a short report.
 */
import { generateKeyPairSync } from 'node:crypto'
import { cpus } from 'node:os'
import postgres from 'postgres'
import { type AuditLog, createDirectAuditLog } from '../src/audit/audit-log.js'
import { createGroupCommitAuditLog } from '../src/audit/group-commit.js'
import { verifyStoredLog } from '../src/audit/log-verifier.js'
import { newId } from '../src/core/ids.js'
import { randomBase62 } from '../src/core/random.js'
import { draft } from '../src/core/receipt.js'
import { migrate } from '../src/store/migrate.js'
import { createCheckpointStore } from '../src/store/postgres/checkpoint-store.js'
import { openDatabase } from '../src/store/postgres/connect.js'
import { createReceiptReader } from '../src/store/postgres/receipt-reader.js'
import { createSystemOfRecord } from '../src/store/postgres/system-of-record.js'
import { measureCpu, pidsOf } from './support/cpu-time.js'

const BASE_URL = process.env.WRITEGATE_BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5)
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 64)
const POOL = 10 // database.maxConnections default

interface Result {
  mode: string
  tenants: number
  receipts: number
  seconds: number
  perSecond: number
  p50ms: number
  p99ms: number
  /** CPU µs per receipt: this process (the appenders and the log) and every Postgres process. */
  cpuUs: { node: number; postgres: number }
}

async function run(log: AuditLog, mode: string, tenants: string[], seconds: number): Promise<Result> {
  const latencies: number[] = []
  let receipts = 0
  // Throughput here is 64 ÷ one commit's latency, which the host's speed moves; CPU per
  // receipt tells what a change saved on either side of the connection.
  const cpu = measureCpu({ node: () => [process.pid], postgres: () => pidsOf('postgres') })
  const start = performance.now()
  const deadline = start + seconds * 1000
  async function appender(n: number): Promise<void> {
    const tenantId = tenants[n % tenants.length] as string
    while (performance.now() < deadline) {
      const t0 = performance.now()
      await log.append([
        draft({
          receiptId: newId('receipt'),
          tenantId,
          kind: 'CHECK',
          decision: 'ALLOW',
          verb: 'refund',
          target: `order-${n}`,
          createdAt: Math.floor(Date.now() / 1000),
          detail: { appender: n },
        }),
      ])
      latencies.push(performance.now() - t0)
      receipts += 1
    }
  }
  await Promise.all(Array.from({ length: CONCURRENCY }, (_, n) => appender(n)))
  const elapsed = (performance.now() - start) / 1000
  const used = cpu()
  latencies.sort((a, b) => a - b)
  const q = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))] ?? 0
  return {
    mode,
    tenants: tenants.length,
    receipts,
    seconds: elapsed,
    perSecond: receipts / elapsed,
    p50ms: q(0.5),
    p99ms: q(0.99),
    cpuUs: { node: ((used.node ?? 0) * 1000) / receipts, postgres: ((used.postgres ?? 0) * 1000) / receipts },
  }
}

async function main(): Promise<void> {
  const admin = postgres(BASE_URL, { max: 1, onnotice: () => {} })
  const name = `wgbench_${randomBase62(10).toLowerCase()}`
  await admin.unsafe(`create database ${name}`)
  const url = new URL(BASE_URL)
  url.pathname = `/${name}`
  const db = await openDatabase({ kind: 'postgres', url: url.toString(), maxConnections: POOL })
  try {
    await migrate(db.sql)
    const sor = createSystemOfRecord(db)
    const direct = createDirectAuditLog(sor)
    const group = createGroupCommitAuditLog({ sor })
    const results: Result[] = []
    for (const tenantCount of [1, 16]) {
      const tenants = Array.from({ length: tenantCount }, () => newId('tenant'))
      // Warm-up: connections, plans, head rows.
      await run(direct, 'warm-up', tenants, 0.5)
      await run(group, 'warm-up', tenants, 0.5)
      results.push(await run(direct, 'one transaction per append', tenants, SECONDS))
      results.push(await run(group, 'group commit', tenants, SECONDS))
      await group.flush()
      // The benchmark must not have bought speed with a broken chain.
      const publicKey = generateKeyPairSync('ed25519').publicKey
      for (const tenantId of tenants) {
        const v = await verifyStoredLog(
          { reader: createReceiptReader(db.sql), checkpoints: createCheckpointStore(db.sql), publicKey },
          tenantId,
          {},
        )
        if (!v.valid) throw new Error(`chain of ${tenantId} is invalid: ${v.reason}`)
      }
    }
    const [version] = await db.sql<{ v: string }[]>`select current_setting('server_version') as v`
    const lines = [
      `writegate audit append benchmark: PostgreSQL ${version?.v}, ${cpus().length} CPUs, node ${process.version}`,
      `${CONCURRENCY} concurrent appenders, one receipt per append, ${SECONDS} s per run, pool of ${POOL} connections`,
      '',
      '| tenants | mode | receipts/s | p50 ms | p99 ms | receipts | CPU µs per receipt: this process, Postgres |',
      '|---|---|---|---|---|---|---|',
      ...results.map(
        (r) =>
          `| ${r.tenants} | ${r.mode} | ${r.perSecond.toFixed(0)} | ${r.p50ms.toFixed(1)} | ${r.p99ms.toFixed(1)} | ${r.receipts} | ${r.cpuUs.node.toFixed(0)}, ${r.cpuUs.postgres.toFixed(0)} |`,
      ),
      '',
    ]
    for (const tenantCount of [1, 16]) {
      const d = results.find((r) => r.tenants === tenantCount && r.mode.startsWith('one'))
      const g = results.find((r) => r.tenants === tenantCount && r.mode === 'group commit')
      if (d && g) {
        lines.push(
          `${tenantCount} tenant(s): group commit is ${(g.perSecond / d.perSecond).toFixed(1)}x one transaction per append`,
        )
      }
    }
    const best = Math.min(...results.filter((r) => r.mode === 'group commit').map((r) => r.perSecond))
    lines.push(
      `target: group commit >= 20,000 receipts/s at ${CONCURRENCY} writers (issue 19): ${best >= 20_000 ? 'met' : 'NOT met'} (lowest ${best.toFixed(0)}/s)`,
    )
    lines.push('every chain verified after its run')
    process.stdout.write(`${lines.join('\n')}\n`)
  } finally {
    await db.close()
    await admin.unsafe(`drop database if exists ${name} with (force)`)
    await admin.end({ timeout: 1 })
  }
}

main().catch((err) => {
  process.stderr.write(`bench/audit: ${(err as Error).message}\n`)
  process.exit(1)
})
