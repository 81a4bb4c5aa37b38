import { createInterceptionCa } from '../tls/interception-ca.js'
import { UsageError } from './arguments.js'
import type { CommandIo } from './commands.js'
import { CommandError, writeNewKeyFiles } from './new-key-file.js'

/** `writegate ca init <cert> <key> --hosts a,b [--days N]`. */
export async function caInitCommand(
  certFile: string,
  keyFile: string,
  options: Record<string, string | undefined>,
  io: CommandIo,
): Promise<void> {
  const hosts = (options.hosts ?? '')
    .split(',')
    .map((h) => h.trim())
    .filter(Boolean)
  if (hosts.length === 0) throw new UsageError('missing --hosts <host,…>: the CA may vouch only for them')
  const days = options.days === undefined ? 365 : Number(options.days)
  if (!Number.isInteger(days) || days < 1 || days > 3650) throw new UsageError('--days must be 1 to 3650')
  let made: { certPem: string; keyPem: string }
  try {
    made = await createInterceptionCa({ hosts, days })
  } catch (err) {
    throw new CommandError(`cannot create the CA: ${(err as Error).message}`)
  }
  writeNewKeyFiles([
    { path: keyFile, data: made.keyPem, mode: 0o600 },
    { path: certFile, data: made.certPem, mode: 0o644 },
  ])
  io.stdout(
    `wrote ${certFile} (name-constrained to ${hosts.join(', ')}; no IP address; ${days} days) and its key ${keyFile} (mode 0600)\n`,
  )
}
