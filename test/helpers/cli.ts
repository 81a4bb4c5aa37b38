import { spawn } from 'node:child_process'
import { join } from 'node:path'
import type { CommandIo } from '../../src/cli/commands.js'

export const ROOT = join(import.meta.dirname, '..', '..')
/** What `npx writegate` runs (package.json "bin"). */
export const LAUNCHER = join(ROOT, 'bin', 'writegate.js')

export interface CliResult {
  code: number | null
  stdout: string
  stderr: string
}

export interface CliOptions {
  env?: Record<string, string>
  cwd?: string
  input?: string
  timeoutMs?: number
}

/** A clean environment: no WRITEGATE_* from the caller's shell, the repository's settings file. */
export function cliEnv(env: Record<string, string> = {}): Record<string, string> {
  return {
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? '',
    WRITEGATE_CONFIG: join(ROOT, 'config', 'writegate.yaml'),
    ...env,
  }
}

/** Runs `writegate <args>` through the launcher, as an operator would, and collects its output. */
export function runCli(args: string[], opts: CliOptions = {}): Promise<CliResult> {
  return runProcess(process.execPath, [LAUNCHER, ...args], opts)
}

export function runProcess(file: string, args: string[], opts: CliOptions = {}): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, {
      cwd: opts.cwd ?? ROOT,
      env: cliEnv(opts.env),
      stdio: ['pipe', 'pipe', 'pipe'],
      timeout: opts.timeoutMs ?? 60_000,
    })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d) => (stdout += d))
    child.stderr.on('data', (d) => (stderr += d))
    child.on('error', reject)
    child.on('close', (code) => resolve({ code, stdout: stdout.trim(), stderr: stderr.trim() }))
    child.stdin.end(opts.input ?? '')
  })
}

/** Runs `fn` over the items two at a time: each is a node process, and the machine has two cores. */
export async function inPairs<T, R>(items: readonly T[], fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = []
  for (let i = 0; i < items.length; i += 2) out.push(...(await Promise.all(items.slice(i, i + 2).map(fn))))
  return out
}

/** A command's io for an in-process run: what it prints to stdout and stderr, recorded. */
export function recordedIo(): { io: CommandIo; out: () => string; err: () => string } {
  let out = ''
  let err = ''
  return {
    io: {
      stdout: (s: string) => {
        out += s
      },
      stderr: (s: string) => {
        err += s
      },
      stderrIsTty: false,
      stdin: process.stdin,
    },
    out: () => out,
    err: () => err,
  }
}
