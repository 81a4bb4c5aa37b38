import { type ChildProcess, spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, isAbsolute, join } from 'node:path'
import fc from 'fast-check'
import { Redis } from 'ioredis'
import t, { type Test } from 'tap'
import { COMMANDS } from '../../src/cli/commands.js'
import { newApiKey } from '../../src/core/credentials.js'
import { newAuditSigningKeyPem } from '../../src/security/audit-signing-key.js'
import { matchTotpStep, newTotpEnrolment } from '../../src/security/totp.js'
import { draftArb, ed25519, exportLines } from '../helpers/audit-logs.js'
import { openTestDatabase } from '../helpers/backends.js'
import { type CliResult, cliEnv, inPairs, LAUNCHER, ROOT, runProcess } from '../helpers/cli.js'
import { blocks, commands, isShell, type Segment, segments } from '../helpers/markdown-shell.js'
import { TEST_REDIS_URL } from '../helpers/servers.js'

/**
 * Every `npx writegate …` and `npm …` command that README.md, DEVELOPERS.md, docs/*.md and the
 * chart's README print in a shell block, run as printed in a checkout after `npm ci`: for real
 * where that is cheap (with the files it names made first), started and stopped where it is a
 * server, with --help where it needs more (a tenant, a cluster). `npx writegate` itself is run
 * once through npx; the others go straight to the launcher it resolves to (package.json "bin").
 */

const PAGES = [
  'README.md',
  'DEVELOPERS.md',
  join('charts', 'writegate', 'README.md'),
  ...readdirSync(join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => join('docs', f)),
]

interface Printed {
  page: string
  line: string
  /** The simple command this entry is about. */
  segment: Segment
  /** What runs: the command, and the commands piping into it. */
  runnable: string
}

function printedCommands(): Printed[] {
  const out: Printed[] = []
  for (const page of PAGES) {
    const markdown = readFileSync(join(ROOT, page), 'utf8')
    for (const block of blocks(markdown).filter(isShell)) {
      for (const line of commands(block)) {
        const segs = segments(line)
        segs.forEach((segment, i) => {
          const [cmd, sub] = segment.argv
          if (cmd !== 'writegate' && cmd !== 'npm' && !(cmd === 'npx' && sub === 'writegate')) return
          let first = i
          while (first > 0 && segs[first]?.joinedBy === '|') first--
          const runnable = segs
            .slice(first, i + 1)
            .map((s) => s.raw)
            .join(' | ')
          out.push({ page, line, segment, runnable })
        })
      }
    }
  }
  return out
}

const PRINTED = printedCommands()
const PACKAGE = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  scripts: Record<string, string>
}

/** A directory standing in for the checkout: files the commands name are made here, not in the repository. */
function sandbox(): string {
  const dir = mkdtempSync(join(tmpdir(), 'wg-docs-cmd-'))
  symlinkSync(join(ROOT, 'config'), join(dir, 'config'))
  return dir
}

/** An absolute path a command names (/etc/writegate/audit.pem) is made under the sandbox instead. */
function reroot(text: string, dir: string): string {
  return text.replace(/(^|[\s=])(\/(?:etc|var|run|tmp)\/[^\s'"]+)/g, (_, pre: string, path: string) => {
    mkdirSync(dirname(join(dir, path)), { recursive: true })
    return `${pre}${join(dir, path)}`
  })
}

function inSandbox(dir: string, file: string): string {
  return isAbsolute(file) ? file : join(dir, file)
}

/**
 * bash with `npx writegate` resolved to the launcher (as npx resolves it, proved below) and npm
 * run on the checkout's package.json (the sandbox has none).
 */
const PRELUDE = `
npx() { if [ "$1" = writegate ]; then shift; node ${JSON.stringify(LAUNCHER)} "$@"; else command npx "$@"; fi; }
npm() { command npm --prefix ${JSON.stringify(ROOT)} "$@"; }
set -o pipefail
`

function bash(script: string, cwd: string, env: Record<string, string>): Promise<CliResult> {
  return runProcess('bash', ['-c', `${PRELUDE}${script}`], { cwd, env })
}

/** Starts a server command, waits for its "listening" log line, then stops it (its whole process group). */
async function startAndStop(
  t: Test,
  script: string,
  cwd: string,
  env: Record<string, string>,
  listening: RegExp,
): Promise<void> {
  const child: ChildProcess = spawn('bash', ['-c', `${PRELUDE}${script}`], {
    cwd,
    env: cliEnv(env),
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let out = ''
  child.stdout?.on('data', (d) => (out += d))
  child.stderr?.on('data', (d) => (out += d))
  const running = () => child.exitCode === null && child.signalCode === null
  const stop = () => {
    if (child.pid !== undefined && running()) process.kill(-child.pid, 'SIGTERM')
  }
  t.teardown(stop)
  const up = await new Promise<boolean>((resolve) => {
    const timer = setTimeout(() => resolve(false), 60_000)
    const check = () => {
      if (listening.test(out)) {
        clearTimeout(timer)
        resolve(true)
      }
    }
    child.stdout?.on('data', check)
    child.stderr?.on('data', check)
    child.on('exit', () => {
      clearTimeout(timer)
      resolve(listening.test(out))
    })
  })
  t.ok(up, `started: ${script}\n${out}`)
  stop()
  await new Promise((resolve) => (running() ? child.on('exit', resolve) : resolve(null)))
  t.notMatch(out, /"level":50|Error:|\n\s+at /, 'no error and no stack on the way')
}

/** A settings file of the repository's defaults with a Redis key prefix of this test's own. */
function settingsWithPrefix(dir: string, prefix: string): string {
  const file = join(dir, 'writegate.yaml')
  const base = readFileSync(join(ROOT, 'config', 'writegate.yaml'), 'utf8').replace(
    /^redis: \{\}.*$/m,
    `redis:\n  keyPrefix: "${prefix}"`,
  )
  writeFileSync(file, base)
  return file
}

t.test('the pages print commands, none of them a bare `writegate` (not on PATH after npm ci)', async (t) => {
  t.ok(PRINTED.length >= 10, `${PRINTED.length} commands`)
  const bare = PRINTED.filter((p) => p.segment.argv[0] === 'writegate').map((p) => `${p.page}: ${p.line}`)
  t.same(bare, [], 'print `npx writegate …`')
})

t.test(
  '`npx writegate` resolves in the checkout (a private npm cache, so no stale entry decides)',
  async (t) => {
    const first = PRINTED.find((p) => p.segment.argv[0] === 'npx') as Printed
    const args = first.segment.argv.slice(2, 3)
    const r = await runProcess('npx', ['writegate', ...args, '--help'], {
      env: {
        npm_config_cache: mkdtempSync(join(tmpdir(), 'wg-npx-cache-')),
        npm_config_update_notifier: 'false',
      },
    })
    t.equal(r.code, 0, `${first.line}: ${r.stderr}`)
    t.match(r.stdout, new RegExp(`^Usage: writegate ${args.join(' ')}`))
  },
)

t.test('every printed `npx writegate` command runs as printed', async (t) => {
  const cases = PRINTED.filter((p) => p.segment.argv[0] === 'npx')
  const db = await openTestDatabase('postgres', { migrate: false })
  t.teardown(() => db.close())
  const prefix = `wgdocs${randomBytes(4).toString('hex')}:`
  const redis = new Redis(TEST_REDIS_URL)
  t.teardown(async () => {
    const keys = await redis.keys(`${prefix}*`)
    if (keys.length > 0) await redis.del(...keys)
    redis.disconnect()
  })
  const known = new Set(COMMANDS.map((c) => c.name.split(' ')[0]))
  await inPairs(cases, async (p) => {
    const [, , command, ...rest] = p.segment.argv
    t.ok(known.has(command as string), `${p.page}: a writegate command: ${p.line}`)
    const dir = sandbox()
    const what = `${p.page}: ${p.line}`
    const ports = { WRITEGATE_PORT: '0', WRITEGATE_PROXY_PORT: '0', WRITEGATE_METRICS_PORT: '0' }
    const env = { WRITEGATE_DATA_DIR: join(dir, 'data'), ...ports }
    const script = reroot(p.runnable, dir).replaceAll('redis://127.0.0.1:6379', TEST_REDIS_URL)
    if (command === 'keygen' || command === 'audit-keygen') {
      const r = await bash(script, dir, env)
      t.equal(r.code, 0, `${what}: ${r.stderr}`)
      const file = inSandbox(dir, reroot(rest[0] as string, dir))
      t.ok(existsSync(file), `${what}: wrote ${rest[0]}`)
      if (command === 'audit-keygen') t.ok(existsSync(`${file}.pub`), 'and its public key')
    } else if (command === 'verify') {
      // A small export, and the public key it verifies against, under the names printed.
      const keyArg = rest[rest.indexOf('--public-key') + 1] as string
      const key = ed25519()
      const { lines } = exportLines('ten_docs', fc.sample(draftArb('ten_docs'), 5), key.privateKey)
      writeFileSync(inSandbox(dir, rest[0] as string), `${lines.join('\n')}\n`)
      writeFileSync(inSandbox(dir, keyArg), key.publicKey.export({ format: 'pem', type: 'spki' }))
      const r = await bash(script, dir, env)
      t.equal(r.code, 0, `${what}: ${r.stderr}`)
      t.match(r.stdout, /^valid: tenant ten_docs, 5 receipts/, what)
    } else if (command === 'totp') {
      // key.json as POST /v1/keys answered for a new tenant.
      const { secret, otpauthUrl } = newTotpEnrolment('writegate', 'you@example.com')
      writeFileSync(
        join(dir, 'key.json'),
        JSON.stringify({ apiKey: newApiKey(), totp: { secret, otpauthUrl } }),
      )
      const r = await bash(script, dir, env)
      t.equal(r.code, 0, `${what}: ${r.stderr}`)
      t.not(
        await matchTotpStep(secret, r.stdout, Math.floor(Date.now() / 1000)),
        null,
        `${what}: a valid code`,
      )
    } else if (command === 'proxy') {
      // The files it is given: an agent key, and a (deprecated) route table if one is named.
      const routesFile = p.segment.assignments.WRITEGATE_ROUTES_FILE
      if (routesFile !== undefined) {
        const routes = inSandbox(dir, reroot(routesFile, dir))
        if (!existsSync(routes)) copyFileSync(join(ROOT, 'config', 'systems.example.yaml'), routes)
      }
      const keyFile = inSandbox(
        dir,
        reroot(p.segment.assignments.WRITEGATE_PROXY_API_KEY_FILE as string, dir),
      )
      writeFileSync(keyFile, `${newApiKey()}\n`)
      await startAndStop(
        t,
        script,
        dir,
        { ...env, WRITEGATE_CONFIG: settingsWithPrefix(dir, prefix) },
        /"msg":"writegate gate-proxy listening"/,
      )
    } else {
      // Needs what only a deployment has (a tenant's signed manifest, say): it must parse.
      const r = await bash(`${script} --help`, dir, env)
      t.equal(r.code, 0, `${what} --help: ${r.stderr}`)
      t.match(r.stdout, new RegExp(`^Usage: writegate ${command}`), what)
    }
  })
})

t.test('every printed npm command runs, or names what the checkout has', async (t) => {
  const cases = PRINTED.filter((p) => p.segment.argv[0] === 'npm')
  t.ok(cases.some((p) => p.segment.argv[1] === 'start'))
  const db = await openTestDatabase('postgres', { migrate: false })
  t.teardown(() => db.close())
  const prefix = `wgdocs${randomBytes(4).toString('hex')}:`
  const redis = new Redis(TEST_REDIS_URL)
  t.teardown(async () => {
    const keys = await redis.keys(`${prefix}*`)
    if (keys.length > 0) await redis.del(...keys)
    redis.disconnect()
  })
  for (const p of cases) {
    const [, verb, script] = p.segment.argv
    const what = `${p.page}: ${p.line}`
    if (verb === 'ci') {
      // This test runs after it: the lock file is the one it installs from.
      t.ok(
        existsSync(join(ROOT, 'package-lock.json')) &&
          existsSync(join(ROOT, 'node_modules', '.package-lock.json')),
        what,
      )
    } else if (verb === 'test') {
      // The whole suite, which this test is part of: each step it runs exists.
      for (const step of PACKAGE.scripts.test?.split('&&') ?? []) {
        const s = step.trim().split(' ')
        if (s[0] === 'npm' && s[1] === 'run') t.ok(PACKAGE.scripts[s[2] as string], `${what}: ${step}`)
        else if (s[0] === 'node') t.ok(existsSync(join(ROOT, s[1] as string)), `${what}: ${step}`)
        else t.ok(existsSync(join(ROOT, 'node_modules', '.bin', s[0] as string)), `${what}: ${step}`)
      }
    } else if (verb === 'start') {
      // On a Postgres server, so as not to create an embedded cluster for a minute's test
      // (test/cli/readme-walkthrough.test.ts runs the embedded default).
      const dir = sandbox()
      const master = join(dir, 'master.key')
      const audit = join(dir, 'audit.pem')
      writeFileSync(master, randomBytes(32).toString('base64'))
      writeFileSync(audit, newAuditSigningKeyPem().privatePem)
      await startAndStop(
        t,
        p.runnable.replaceAll('redis://127.0.0.1:6379', TEST_REDIS_URL),
        dir,
        {
          WRITEGATE_CONFIG: settingsWithPrefix(dir, prefix),
          WRITEGATE_DATA_DIR: join(dir, 'data'),
          WRITEGATE_DATABASE_URL: db.url as string,
          WRITEGATE_MASTER_KEY_FILE: master,
          WRITEGATE_AUDIT_SIGNING_KEY_FILE: audit,
          WRITEGATE_PORT: '0',
          WRITEGATE_PROXY_PORT: '0',
          WRITEGATE_METRICS_PORT: '0',
        },
        /"msg":"writegate control plane listening"/,
      )
    } else {
      t.ok(verb === 'run' && PACKAGE.scripts[script as string], `${what}: a script of package.json`)
    }
  }
})

t.test('the pages name only commands and scripts that exist, in prose too', async (t) => {
  const names = new Set([...COMMANDS.map((c) => c.name.split(' ')[0]), 'help'])
  for (const page of PAGES) {
    const markdown = readFileSync(join(ROOT, page), 'utf8')
    for (const m of markdown.matchAll(/`(?:npx )?writegate ([a-z][a-z-]*)/g))
      t.ok(names.has(m[1] as string), `${page}: writegate ${m[1]}`)
    for (const m of markdown.matchAll(/`npm run ([\w:-]+)/g))
      t.ok(PACKAGE.scripts[m[1] as string], `${page}: npm run ${m[1]}`)
  }
})
