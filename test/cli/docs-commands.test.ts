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
import { type AddressInfo, createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { dirname, isAbsolute, join } from 'node:path'
import fc from 'fast-check'
import { Redis } from 'ioredis'
import t, { type Test } from 'tap'
import { COMMANDS } from '../../src/cli/commands.js'
import { loadSettings } from '../../src/config/load.js'
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

/** A server command started: what it has printed so far, and how to stop it (its whole process group). */
interface Running {
  output(): string
  stop(): Promise<void>
}

/** Starts a server command and waits for its "listening" log line; it runs until stopped (or the test ends). */
async function startServer(
  t: Test,
  script: string,
  cwd: string,
  env: Record<string, string>,
  listening: RegExp,
): Promise<Running> {
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
  const kill = () => {
    if (child.pid !== undefined && running()) process.kill(-child.pid, 'SIGTERM')
  }
  t.teardown(kill)
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
  return {
    output: () => out,
    async stop() {
      kill()
      await new Promise((resolve) => (running() ? child.on('exit', resolve) : resolve(null)))
    },
  }
}

/** Starts a server command, waits for its "listening" log line, then stops it (its whole process group). */
async function startAndStop(
  t: Test,
  script: string,
  cwd: string,
  env: Record<string, string>,
  listening: RegExp,
): Promise<void> {
  const server = await startServer(t, script, cwd, env, listening)
  await server.stop()
  t.notMatch(server.output(), /"level":50|Error:|\n\s+at /, 'no error and no stack on the way')
}

/** A loopback port free now, for a listener the test moves off a printed one. */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer()
    s.on('error', reject)
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as AddressInfo
      s.close(() => resolve(port))
    })
  })
}

/**
 * A command's own listener ports (`WRITEGATE_METRICS_PORT=9465`) moved to 0, as the tests' env
 * moves the defaults, so runs do not collide; the side-by-side test checks the printed ones.
 */
function anyPorts(script: string): string {
  return script.replace(/\b(WRITEGATE_(?:PORT|PROXY_PORT|METRICS_PORT|INJECTOR_PORT))=\d+/g, '$1=0')
}

/** A Postgres database of the test's own, and a Redis key prefix whose keys go when it ends. */
async function backends(t: Test) {
  const db = await openTestDatabase('postgres', { migrate: false })
  t.teardown(() => db.close())
  const prefix = `wgdocs${randomBytes(4).toString('hex')}:`
  const redis = new Redis(TEST_REDIS_URL)
  t.teardown(async () => {
    const keys = await redis.keys(`${prefix}*`)
    if (keys.length > 0) await redis.del(...keys)
    redis.disconnect()
  })
  return { db, prefix }
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
  const { prefix } = await backends(t)
  const known = new Set(COMMANDS.map((c) => c.name.split(' ')[0]))
  await inPairs(cases, async (p) => {
    const [, , command, ...rest] = p.segment.argv
    t.ok(known.has(command as string), `${p.page}: a writegate command: ${p.line}`)
    const dir = sandbox()
    const what = `${p.page}: ${p.line}`
    const ports = { WRITEGATE_PORT: '0', WRITEGATE_PROXY_PORT: '0', WRITEGATE_METRICS_PORT: '0' }
    const env = { WRITEGATE_DATA_DIR: join(dir, 'data'), ...ports }
    const script = anyPorts(reroot(p.runnable, dir)).replaceAll('redis://127.0.0.1:6379', TEST_REDIS_URL)
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
  const { db, prefix } = await backends(t)
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
        anyPorts(p.runnable).replaceAll('redis://127.0.0.1:6379', TEST_REDIS_URL),
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

t.test("the README's control plane and gate-proxy run side by side on one machine, as printed", async (t) => {
  const readme = PRINTED.filter((p) => p.page === 'README.md')
  const start = readme.find(
    (p) =>
      p.segment.argv[0] === 'npm' &&
      p.segment.argv[1] === 'start' &&
      p.segment.assignments.WRITEGATE_REDIS_URL !== undefined,
  )
  const proxy = readme.find((p) => p.segment.argv[0] === 'npx' && p.segment.argv[2] === 'proxy')
  if (start === undefined || proxy === undefined) {
    t.fail('the README prints a control plane on Redis and a gate-proxy beside it')
    return
  }
  t.equal(
    proxy.segment.assignments.WRITEGATE_REDIS_URL,
    start.segment.assignments.WRITEGATE_REDIS_URL,
    'on the same Redis',
  )
  // What each would listen on and allow as printed: the settings file under its own variables.
  const printed = (p: Printed) =>
    loadSettings({ WRITEGATE_CONFIG: join(ROOT, 'config', 'writegate.yaml'), ...p.segment.assignments })
  const at = (p: Printed) => `${printed(p).metrics.host}:${printed(p).metrics.port}`
  t.not(
    at(proxy),
    at(start),
    `their metrics listeners differ (control plane ${at(start)}, proxy ${at(proxy)})`,
  )

  // Both can resolve the credential the README's system names: the proxy sends the writes it
  // allows, the control plane the STEP_UP writes a human approves.
  const block = blocks(readFileSync(join(ROOT, 'README.md'), 'utf8')).find(
    (b) => isShell(b) && commands(b).includes(proxy.line),
  )
  const fromEnv = /"fromEnv": *"(\w+)"/.exec(block?.text ?? '')?.[1]
  t.ok(fromEnv, 'the block enrols a system with a credential from the environment')
  for (const p of [start, proxy]) {
    t.ok(
      printed(p).credentials.allowEnv.includes(fromEnv as string) &&
        p.segment.assignments[fromEnv as string] !== undefined,
      `${p.line}: allows and is given ${fromEnv}`,
    )
  }

  // Run together, each printed metrics port moved to a free one, the same printed port to the
  // same free one: a clash as printed is a clash here.
  const moved = new Map<number, number>()
  const move = async (port: number) => {
    if (!moved.has(port)) moved.set(port, await freePort())
    return moved.get(port) as number
  }
  const withMetrics = async (p: Printed, script: string, env: Record<string, string>) => {
    const to = await move(printed(p).metrics.port)
    const assigned = p.segment.assignments.WRITEGATE_METRICS_PORT
    if (assigned === undefined) return { to, script, env: { ...env, WRITEGATE_METRICS_PORT: String(to) } }
    const rewritten = script.replace(`WRITEGATE_METRICS_PORT=${assigned}`, `WRITEGATE_METRICS_PORT=${to}`)
    t.not(rewritten, script, `${p.line}: its metrics port moved`)
    return { to, script: rewritten, env }
  }

  const { db, prefix } = await backends(t)
  const dir = sandbox()
  const master = join(dir, 'master.key')
  const audit = join(dir, 'audit.pem')
  writeFileSync(master, randomBytes(32).toString('base64'))
  writeFileSync(audit, newAuditSigningKeyPem().privatePem)
  writeFileSync(
    inSandbox(dir, reroot(proxy.segment.assignments.WRITEGATE_PROXY_API_KEY_FILE as string, dir)),
    `${newApiKey()}\n`,
  )
  const common = {
    WRITEGATE_CONFIG: settingsWithPrefix(dir, prefix),
    WRITEGATE_DATA_DIR: join(dir, 'data'),
    WRITEGATE_PORT: '0',
    WRITEGATE_PROXY_PORT: '0',
  }
  const cp = await withMetrics(start, start.runnable.replaceAll('redis://127.0.0.1:6379', TEST_REDIS_URL), {
    ...common,
    WRITEGATE_DATABASE_URL: db.url as string,
    WRITEGATE_MASTER_KEY_FILE: master,
    WRITEGATE_AUDIT_SIGNING_KEY_FILE: audit,
  })
  const px = await withMetrics(
    proxy,
    reroot(proxy.runnable, dir).replaceAll('redis://127.0.0.1:6379', TEST_REDIS_URL),
    common,
  )
  const controlPlane = await startServer(
    t,
    cp.script,
    dir,
    cp.env,
    /"msg":"writegate control plane listening"/,
  )
  const gateProxy = await startServer(t, px.script, dir, px.env, /"msg":"writegate gate-proxy listening"/)
  t.match(
    controlPlane.output(),
    `"metricsPort":${cp.to}`,
    'the control plane serves metrics where it was told',
  )
  t.match(gateProxy.output(), `"metricsPort":${px.to}`, 'and the proxy beside it where it was told')
  await gateProxy.stop()
  await controlPlane.stop()
  for (const [name, server] of [
    ['control plane', controlPlane],
    ['gate-proxy', gateProxy],
  ] as const)
    t.notMatch(server.output(), /"level":50|Error:|\n\s+at /, `${name}: no error and no stack on the way`)
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
