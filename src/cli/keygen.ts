import { randomBytes } from 'node:crypto'
import { writeNewKeyFiles } from './new-key-file.js'

/** `writegate keygen <file>`: a new 32-byte master key (base64), mode 0600, never overwriting. */
export function keygenCommand(file: string, out: (s: string) => void): void {
  writeNewKeyFiles([{ path: file, data: `${randomBytes(32).toString('base64')}\n`, mode: 0o600 }])
  out(`wrote a new master key to ${file} (set secrets.masterKeyFile / WRITEGATE_MASTER_KEY_FILE)\n`)
}
