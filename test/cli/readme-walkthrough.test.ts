import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import { mkdtempSync, readFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'

const root = join(import.meta.dirname, '..', '..')

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port
      s.close(() => resolve(port))
    })
  })
}

async function waitFor(url: string, child: ChildProcess, ms = 60_000): Promise<void> {
  const deadline = Date.now() + ms
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`server exited with ${child.exitCode}`)
    try {
      if ((await fetch(url)).ok) return
    } catch {}
    await new Promise((r) => setTimeout(r, 200))
  }
  throw new Error(`server not up at ${url}`)
}

t.test("the README's quick start works as printed, on the embedded defaults", async (t) => {
  const readme = readFileSync(join(root, 'README.md'), 'utf8')
  const block = /<!-- walkthrough:start -->\s*```sh\n([\s\S]*?)```/.exec(readme)?.[1]
  t.ok(block, 'the README has the walk-through block')
  const port = await freePort()
  const dataDir = mkdtempSync(join(tmpdir(), 'wg-readme-'))
  // `npm start` as printed, with only the port and data dir moved so tests do not collide. Its
  // own process group, so stopping it stops npm's child too.
  const child = spawn('npm', ['start'], {
    cwd: root,
    detached: true,
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '',
      WRITEGATE_PORT: String(port),
      WRITEGATE_PROXY_PORT: '0',
      WRITEGATE_METRICS_PORT: '0',
      WRITEGATE_DATA_DIR: dataDir,
      WRITEGATE_LOG_LEVEL: 'warn',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let logs = ''
  child.stdout?.on('data', (d) => (logs += d))
  child.stderr?.on('data', (d) => (logs += d))
  t.teardown(() => {
    if (child.pid !== undefined && child.exitCode === null && child.signalCode === null)
      process.kill(-child.pid, 'SIGTERM')
  })
  await waitFor(`http://127.0.0.1:${port}/healthz`, child)

  const script = (block as string).replaceAll('localhost:8080', `localhost:${port}`)
  const cwd = mkdtempSync(join(tmpdir(), 'wg-readme-cwd-'))
  const out = execFileSync(
    'bash',
    [
      '-euo',
      'pipefail',
      '-c',
      script
        .replace(/\\\n/g, ' ')
        .split('\n')
        .map((l) => (l.startsWith('curl') ? `${l}; echo` : l))
        .join('\n'),
    ],
    {
      cwd,
      encoding: 'utf8',
      timeout: 60_000,
    },
  )
  const answers = out
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l))
  t.match(answers, [
    { scope: 'tenant', policy: { refund: 'require_grant' }, version: 1 },
    { decision: 'DENY', reason: 'grant_required', verb: 'refund' },
    { grantId: /^grt_/, verb: 'refund', target: 'ch_123' },
    { decision: 'ALLOW', reason: 'grant_consumed', token: /^wgt_/ },
    { revoked: { all: true }, receiptId: /^rcp_/ },
    { decision: 'DENY', reason: 'sponsor_revoked_tenant' },
    { reinstated: { all: true }, receiptId: /^rcp_/ },
  ])
  t.equal(answers.length, 7, 'every curl answered')
  const key = JSON.parse(readFileSync(join(cwd, 'key.json'), 'utf8'))
  const agent = JSON.parse(readFileSync(join(cwd, 'agent.json'), 'utf8'))
  t.match(
    agent,
    { scope: 'agent', apiKey: /^svc_/, tenantId: key.tenantId },
    "an agent key of the walk-through's tenant",
  )
  t.notOk('sponsorToken' in agent || 'totp' in agent, 'a key for an existing tenant shows no tenant secrets')
  t.notMatch(logs, /"level":50/, 'a healthy run logs no errors')
})
