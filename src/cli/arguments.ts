import { parseArgs } from 'node:util'

/** A command line that does not fit its command: one line, exit 2. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'UsageError'
  }
}

export interface OptionSpec {
  /** A value (`--file x`), or a switch (`--dry-run`, read as the value `'true'`). */
  readonly type: 'string' | 'boolean'
  /** A one-letter alias: `-f`. */
  readonly short?: string
}

export interface ArgumentSpec {
  /** Names of the positional arguments, all required, in order (for messages: `<file>`). */
  readonly positionals: readonly string[]
  readonly options?: Readonly<Record<string, OptionSpec>>
}

export type ParsedArguments =
  | { help: true }
  | { help: false; positionals: string[]; options: Record<string, string | undefined> }

/**
 * Parses one command's arguments. `--help` or `-h` anywhere before a `--` asks for the usage
 * and nothing else, whatever else is on the line (so `keygen --help` never writes a file named
 * `--help`); `--` ends the options, for a file whose name starts with `-`.
 */
export function parseArguments(args: readonly string[], spec: ArgumentSpec): ParsedArguments {
  const end = args.indexOf('--')
  const beforeEnd = end === -1 ? args : args.slice(0, end)
  if (beforeEnd.includes('--help') || beforeEnd.includes('-h')) return { help: true }
  let parsed: ReturnType<typeof parseArgs>
  try {
    parsed = parseArgs({
      args: [...args],
      options: { ...spec.options },
      allowPositionals: true,
      strict: true,
    })
  } catch (err) {
    throw new UsageError(describeParseError(err as NodeJS.ErrnoException))
  }
  const positionals = parsed.positionals
  const missing = spec.positionals[positionals.length]
  if (missing !== undefined) throw new UsageError(`missing <${missing}>`)
  const extra = positionals[spec.positionals.length]
  if (extra !== undefined) throw new UsageError(`unexpected argument ${extra}`)
  const options: Record<string, string | undefined> = {}
  for (const name of Object.keys(spec.options ?? {})) {
    const v = parsed.values[name]
    options[name] = typeof v === 'string' ? v : v === true ? 'true' : undefined
  }
  return { help: false, positionals, options }
}

/** node's parseArgs messages run to several sentences; the option they name is what matters. */
function describeParseError(err: NodeJS.ErrnoException): string {
  const named = /'([^']+)'/.exec(err.message)?.[1]?.split(' ')[0]
  switch (err.code) {
    case 'ERR_PARSE_ARGS_UNKNOWN_OPTION':
      return `unknown option ${named ?? ''}`.trim()
    case 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE':
      return `option ${named ?? ''} needs a value`.replace('  ', ' ')
    default:
      return err.message.split('\n')[0] ?? 'bad arguments'
  }
}
