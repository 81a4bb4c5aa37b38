import { rmSync, writeFileSync } from 'node:fs'

/** A command that could not do its work: one line, exit 1. */
export class CommandError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'CommandError'
  }
}

/** Why a new file could not be written, in one line (no errno dump). */
function describeWriteError(file: string, err: NodeJS.ErrnoException): string {
  switch (err.code) {
    case 'EEXIST':
      return `${file} already exists; writegate never overwrites a key (move it away or name another file)`
    case 'ENOENT':
      return `cannot write ${file}: its directory does not exist`
    case 'ENOTDIR':
      return `cannot write ${file}: a parent of it is not a directory`
    case 'EACCES':
    case 'EPERM':
    case 'EROFS':
      return `cannot write ${file}: permission denied`
    default:
      return `cannot write ${file} (${err.code ?? err.message.split('\n')[0]})`
  }
}

/**
 * Writes the files of a new key, all or none: each is created exclusively (an existing file is
 * never overwritten), and if one cannot be, those already written are removed again.
 */
export function writeNewKeyFiles(files: readonly { path: string; data: string; mode: number }[]): void {
  const written: string[] = []
  for (const f of files) {
    try {
      writeFileSync(f.path, f.data, { mode: f.mode, flag: 'wx' })
      written.push(f.path)
    } catch (err) {
      for (const w of written) rmSync(w, { force: true })
      throw new CommandError(describeWriteError(f.path, err as NodeJS.ErrnoException))
    }
  }
}
