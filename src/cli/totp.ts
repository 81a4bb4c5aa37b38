import { readFileSync } from 'node:fs'
import { totpCode } from '../security/totp.js'
import { UsageError } from './arguments.js'
import type { CommandIo } from './commands.js'
import { CommandError } from './new-key-file.js'

/**
 * `writegate totp`: the current code of a tenant's authenticator, from the enrolment secret
 * (`totp.secret` of the POST /v1/keys answer that created the tenant), for a human who approves
 * a STEP_UP write without a phone. The secret is never printed, not even in an error.
 */

/** Authenticator apps show the secret in groups, sometimes in lower case or padded. */
function normaliseSecret(text: string): string {
  return text.replace(/[\s-]/g, '').replace(/=+$/, '').toUpperCase()
}

/** Reads a line from a terminal without showing it. */
function readHidden(io: CommandIo): Promise<string> {
  const stdin = io.stdin as NodeJS.ReadStream
  io.stderr('TOTP secret (not shown): ')
  return new Promise((resolve, reject) => {
    let text = ''
    stdin.setRawMode(true)
    stdin.resume()
    const done = (result: string | Error) => {
      stdin.off('data', onData)
      stdin.setRawMode(false)
      stdin.pause()
      io.stderr('\n')
      if (result instanceof Error) reject(result)
      else resolve(result)
    }
    const onData = (chunk: Buffer) => {
      for (const ch of chunk.toString('utf8')) {
        if (ch === '\r' || ch === '\n') return done(text)
        if (ch === '\u0003' || ch === '\u0004') return done(new CommandError('cancelled'))
        if (ch === '\u007f' || ch === '\b') text = text.slice(0, -1)
        else text += ch
      }
    }
    stdin.on('data', onData)
  })
}

async function readStdin(io: CommandIo): Promise<string> {
  if (io.stdin.isTTY) return readHidden(io)
  let text = ''
  for await (const chunk of io.stdin) text += typeof chunk === 'string' ? chunk : chunk.toString('utf8')
  return text
}

async function secretFrom(options: Record<string, string | undefined>, io: CommandIo): Promise<string> {
  const inline = options.secret
  const file = options['secret-file']
  if (inline !== undefined && file !== undefined)
    throw new UsageError('give --secret or --secret-file, not both')
  if (inline !== undefined) return inline
  if (file === undefined) return readStdin(io)
  try {
    return readFileSync(file, 'utf8')
  } catch (err) {
    throw new CommandError(`cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? 'error'})`)
  }
}

export async function totpCommand(
  options: Record<string, string | undefined>,
  io: CommandIo,
  nowSeconds: number = Math.floor(Date.now() / 1000),
): Promise<void> {
  const secret = normaliseSecret(await secretFrom(options, io))
  if (secret === '') throw new CommandError('no TOTP secret given (see: writegate totp --help)')
  // RFC 4648 base32; writegate's secrets are 32 characters (160 bits), RFC 4226 asks for 128 at least.
  if (!/^[A-Z2-7]{26,}$/.test(secret))
    throw new CommandError(
      'not a TOTP secret: expected the base32 totp.secret of POST /v1/keys (letters A-Z and digits 2-7)',
    )
  io.stdout(`${await totpCode(secret, nowSeconds)}\n`)
}
