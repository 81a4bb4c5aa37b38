import { createReadStream, readFileSync, statSync } from 'node:fs'
import { type ExportVerdict, ExportVerifier } from '../core/audit-export.js'
import { parseEd25519PublicKey } from '../core/ed25519.js'

/**
 * `writegate verify <export> --public-key <file>`: the offline verifier. No server and
 * no database: only core's hashing and signature code, over the file's bytes.
 */

export interface VerifyProgress {
  receipts: number
  bytes: number
}

/** Progress is reported every this many receipts. */
export const PROGRESS_EVERY = 50_000

/**
 * The longest line read. A receipt holds at most one request's worth of what an agent sent (the
 * API and the proxy read 1 MiB bodies), which canonical JSON may escape to six bytes a byte: far
 * under this. A longer line fails at once instead of being held whole (found in review: 400 MiB
 * of one line took 1.3 GB before it failed).
 */
export const MAX_LINE_BYTES = 64 * 1024 * 1024

/**
 * Splits the input into lines on "\n" and feeds them to the verifier. Each line is decoded
 * as strict UTF-8, so an edited byte cannot hide behind a replacement character.
 */
export async function verifyExport(
  input: AsyncIterable<Buffer | string>,
  publicKey: ReturnType<typeof parseEd25519PublicKey>,
  onProgress?: (p: VerifyProgress) => void,
): Promise<ExportVerdict> {
  const verifier = new ExportVerifier(publicKey)
  // ignoreBOM: a byte-order mark is kept, and fails its line as "not JSON" (it is an added byte).
  const decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true })
  let pending: Buffer[] = []
  let pendingBytes = 0
  let bytes = 0
  let nextReport = PROGRESS_EVERY
  const feed = (line: Buffer): boolean => {
    let text: string
    try {
      text = decoder.decode(line)
    } catch {
      text = '\u0000not utf-8' // fails as "not JSON" on its line
    }
    const failed = verifier.line(text) !== null
    if (onProgress && verifier.checked >= nextReport) {
      nextReport += PROGRESS_EVERY
      onProgress({ receipts: verifier.checked, bytes })
    }
    return failed
  }
  for await (const chunk of input) {
    let buf = typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : chunk
    bytes += buf.length
    let nl = buf.indexOf(0x0a)
    while (nl !== -1) {
      pending.push(buf.subarray(0, nl))
      if (pendingBytes + nl > MAX_LINE_BYTES) return verifier.lineTooLong(MAX_LINE_BYTES)
      const line = pending.length === 1 ? (pending[0] as Buffer) : Buffer.concat(pending)
      pending = []
      pendingBytes = 0
      if (feed(line)) return verifier.finish()
      buf = buf.subarray(nl + 1)
      nl = buf.indexOf(0x0a)
    }
    if (buf.length > 0) {
      pending.push(buf)
      pendingBytes += buf.length
      if (pendingBytes > MAX_LINE_BYTES) return verifier.lineTooLong(MAX_LINE_BYTES)
    }
  }
  // Every line the exporter writes ends in "\n": a last line without it was edited (or cut).
  if (pending.length > 0) {
    if (feed(Buffer.concat(pending))) return verifier.finish()
    return verifier.unterminated()
  }
  return verifier.finish()
}

export interface VerifyCommandIo {
  stdout: (s: string) => void
  stderr: (s: string) => void
  stderrIsTty: boolean
}

/** Exit code: 0 valid, 1 invalid (one line saying why), 2 cannot run (unreadable file or key). */
export async function verifyCommand(file: string, keyFile: string, io: VerifyCommandIo): Promise<number> {
  let publicKey: ReturnType<typeof parseEd25519PublicKey>
  let size: number
  try {
    publicKey = parseEd25519PublicKey(readFileSync(keyFile, 'utf8'))
  } catch (err) {
    io.stderr(
      `writegate: verify: cannot use public key ${keyFile}: ${(err as Error).message.split('\n')[0]}\n`,
    )
    return 2
  }
  try {
    const stat = statSync(file)
    if (!stat.isFile()) {
      io.stderr(`writegate: verify: cannot read ${file}: not a file\n`)
      return 2
    }
    size = stat.size
  } catch (err) {
    io.stderr(`writegate: verify: cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? 'error'}\n`)
    return 2
  }
  let reported = false
  let verdict: ExportVerdict
  try {
    verdict = await verifyExport(createReadStream(file), publicKey, (p) => {
      reported = true
      const pct = size > 0 ? Math.floor((p.bytes / size) * 100) : 100
      const text = `verified ${p.receipts} receipts (${pct}%)`
      io.stderr(io.stderrIsTty ? `\r${text}` : `${text}\n`)
    })
  } catch (err) {
    // The file went away or could not be read midway: no verdict on it.
    io.stderr(`writegate: verify: cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? 'error'}\n`)
    return 2
  }
  if (reported && io.stderrIsTty) io.stderr('\n')
  if (verdict.valid) {
    const cp = verdict.checkpoint
    const anchored = cp
      ? `, signed checkpoint at seq ${cp.seq} (${new Date(cp.at * 1000).toISOString()})`
      : ''
    io.stdout(
      `valid: tenant ${verdict.tenantId}, ${verdict.checked} receipts, head seq ${verdict.head.seq} hash ${verdict.head.hash}${anchored}\n`,
    )
    return 0
  }
  const f = verdict.failure
  io.stdout(`invalid: ${f?.reason} at seq ${f?.seq}${f?.line ? ` (line ${f.line})` : ''}: ${f?.message}\n`)
  return 1
}
