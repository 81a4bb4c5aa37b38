import { createHash } from 'node:crypto'
import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { PGlite } from '@electric-sql/pglite'

/**
 * A freshly initdb'd PGlite data directory, dumped once per machine and PGlite version and
 * loaded by every test database: initdb under WASM costs seconds per database, loading the
 * dump about one. The databases still start empty and run every migration.
 */
let cached: Promise<Blob> | undefined

export function pgliteTemplate(): Promise<Blob> {
  cached ??= build()
  return cached
}

async function build(): Promise<Blob> {
  const require = createRequire(import.meta.url)
  // The package exports no package.json: find it beside its entry point.
  const entry = require.resolve('@electric-sql/pglite')
  const root = entry.slice(0, entry.lastIndexOf('/node_modules/@electric-sql/pglite/') + 34)
  const pkg = readFileSync(join(root, 'package.json'), 'utf8')
  const version = (JSON.parse(pkg) as { version: string }).version
  const tag = createHash('sha256').update(`${version}\n${process.version}`).digest('hex').slice(0, 16)
  const file = join(tmpdir(), `writegate-pglite-template-${tag}.tar`)
  if (existsSync(file)) return new Blob([readFileSync(file)])
  const db = await PGlite.create()
  const dump = await db.dumpDataDir('none')
  await db.close()
  const bytes = Buffer.from(await dump.arrayBuffer())
  // Two test files may build it at once: each writes its own file, and the rename is atomic.
  const partial = `${file}.${process.pid}`
  writeFileSync(partial, bytes)
  renameSync(partial, file)
  return new Blob([bytes])
}
