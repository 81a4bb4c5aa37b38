import { existsSync, mkdirSync } from 'node:fs'
import { dirname, resolve } from 'node:path'

/**
 * `mkdirSync(dir, { recursive: true })`, one level at a time. Node's recursive mkdir never
 * returns for a path under one that refuses to create it with ENOENT (`/proc/x`: found in
 * review, `WRITEGATE_DATA_DIR=/proc/x writegate start` hung with no output); level by level,
 * that refusal is thrown like any other, and start-up names the setting.
 */
export function makeDirectory(dir: string, mode: number): void {
  const missing: string[] = []
  for (let d = resolve(dir); !existsSync(d); d = dirname(d)) {
    missing.unshift(d)
    if (dirname(d) === d) break
  }
  // It exists: a directory is left as it is, anything else refused as mkdir refuses it (EEXIST).
  if (missing.length === 0) mkdirSync(resolve(dir), { recursive: true, mode })
  for (const d of missing) mkdirSync(d, { mode })
}
