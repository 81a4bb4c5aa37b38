#!/usr/bin/env node
import { VERSION } from '../version.js'
import { parseArguments, UsageError } from './arguments.js'
import { COMMANDS, type CommandIo, commandUsage, findCommand, generalUsage } from './commands.js'
import { describeFailure } from './failure.js'

/**
 * The `writegate` command line. A command that cannot run prints one line and exits non-zero:
 * 2 for a command line that does not fit (with a pointer to its --help), 1 for anything else.
 */

const io: CommandIo = {
  stdout: (s) => process.stdout.write(s),
  stderr: (s) => process.stderr.write(s),
  stderrIsTty: process.stderr.isTTY === true,
  stdin: process.stdin,
}

function fail(message: string, code: number): never {
  process.stderr.write(`writegate: ${message}\n`)
  process.exit(code)
}

function usageOf(words: string[]): string | null {
  const found = findCommand(words)
  if (found && found.args.length === 0) return commandUsage(found.command)
  // A group such as `manifests`: the usage of each of its commands.
  const group = COMMANDS.filter((c) => c.name.startsWith(`${words.join(' ')} `))
  return words.length > 0 && group.length > 0 ? group.map(commandUsage).join('\n') : null
}

async function main(argv: string[]): Promise<number> {
  const [first, ...rest] = argv
  if (first === undefined || first === '--help' || first === '-h') {
    io.stdout(generalUsage(VERSION))
    return 0
  }
  if (first === '--version') {
    io.stdout(`${VERSION}\n`)
    return 0
  }
  if (first === 'help') {
    const usage = rest.length === 0 ? generalUsage(VERSION) : usageOf(rest)
    if (usage === null) fail(`help: unknown command "${rest.join(' ')}" (try: writegate help)`, 2)
    io.stdout(usage)
    return 0
  }
  const found = findCommand(argv)
  if (!found) {
    const group = usageOf([first])
    if (group === null) fail(`unknown command "${first}" (try: writegate help)`, 2)
    if (rest[0] === '--help' || rest[0] === '-h') {
      io.stdout(group)
      return 0
    }
    fail(
      rest[0] === undefined
        ? `${first}: missing a subcommand (try: writegate help ${first})`
        : `unknown command "${first} ${rest[0]}" (try: writegate help ${first})`,
      2,
    )
  }
  const { command, args } = found
  try {
    const parsed = parseArguments(args, command)
    if (parsed.help) {
      io.stdout(commandUsage(command))
      return 0
    }
    return (await command.run(parsed.positionals, parsed.options, io)) ?? 0
  } catch (err) {
    if (err instanceof UsageError)
      fail(`${command.name}: ${err.message} (see: writegate ${command.name} --help)`, 2)
    throw err
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code
  },
  (err) => fail(describeFailure(err), 1),
)
