import { once } from 'node:events'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { stringify } from 'yaml'
import { z } from 'zod'
import { describeFailure } from '../../src/cli/failure.js'
import { systemsApplyCommand, systemsExportCommand } from '../../src/cli/systems-apply.js'
import { recordedIo } from '../helpers/cli.js'

const dir = mkdtempSync(join(tmpdir(), 'wg-apply-foreign-'))
const systemsFile = join(dir, 'systems.yaml')
writeFileSync(
  systemsFile,
  stringify({
    systems: [
      {
        systemId: 'sys_a',
        upstream: 'https://billing.example.com',
        routes: [{ method: 'POST', path: '/v1/refunds', verb: 'refund' }],
      },
    ],
  }),
)

/** A server at the URL that answers 200 to everything, with what `answer` gives for a path. */
async function fakeServer(
  t: Test,
  answer: (path: string) => { type: string; body: string },
): Promise<string> {
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const a = answer((req.url ?? '/').split('?')[0] ?? '/')
    res.writeHead(200, { 'content-type': a.type })
    res.end(a.body)
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())))
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
}

async function run(command: typeof systemsApplyCommand, url: string) {
  const { io, out, err } = recordedIo()
  const code = await command({ url, file: systemsFile }, io, { WRITEGATE_API_KEY: 'wg_test_key' })
  return { code, out: out(), err: err() }
}

const json = (v: unknown) => ({ type: 'application/json', body: JSON.stringify(v) })

/** A control plane of tenant ten_a that holds `enrolled`. */
const holding = (t: Test, enrolled: Record<string, unknown>) =>
  fakeServer(t, (p) => (p === '/v1/me' ? json({ tenantId: 'ten_a' }) : json({ systems: [enrolled] })))
const html = { type: 'text/html', body: '<!doctype html><title>Sign in</title>' }

// Found in review: these printed `writegate: Cannot read properties of undefined (reading 'map')`.
t.test('a server that is not a writegate control plane is named as such', async (t) => {
  const answers: [string, (path: string) => { type: string; body: string }][] = [
    ['an HTML page', () => html],
    ['{}', () => json({})],
    ['a /v1/me without a tenant', (p) => (p === '/v1/me' ? json({ ok: true }) : json({ systems: [] }))],
    [
      'systems that are not a list',
      (p) => (p === '/v1/me' ? json({ tenantId: 'ten_a' }) : json({ systems: {} })),
    ],
    ['an empty body', () => ({ type: 'application/json', body: '' })],
  ]
  for (const [name, answer] of answers) {
    const url = await fakeServer(t, answer)
    const commands = [['apply', systemsApplyCommand]] as [string, typeof systemsApplyCommand][]
    // Export reads no /v1/me.
    if (!name.includes('/v1/me')) commands.push(['export', systemsExportCommand])
    for (const [label, command] of commands) {
      const r = await run(command, url)
      t.equal(r.code, 1, `${label}, ${name}: fails`)
      t.match(
        r.err,
        new RegExp(`^writegate: ${url.replace(/\./g, '\\.')} is not a writegate control plane: GET /v1/`),
      )
      t.match(r.err, /^[^\n]*\n$/, 'one line')
      t.equal(r.out, '', 'nothing applied or printed')
    }
  }
})

// Found in review: a system the CLI's schema does not know printed `writegate: [`.
t.test('an enrolled system this CLI cannot read is named, with where and why', async (t) => {
  const enrolled = {
    systemId: 'sys_a',
    version: 3,
    upstream: 'https://billing.example.com',
    // A kind from a newer control plane.
    kind: 'grpc',
    routes: [{ method: 'POST', path: '/v1/refunds', verb: 'refund' }],
  }
  const url = await holding(t, enrolled)
  for (const command of [systemsApplyCommand, systemsExportCommand]) {
    const r = await run(command, url)
    t.equal(r.code, 1)
    t.match(r.err, /^writegate: system sys_a: kind: [^\n]+\n$/)
  }
})

t.test('a ZodError that reaches the top prints its first issue, not `[`', async (t) => {
  const parsed = z.object({ a: z.object({ b: z.string() }) }).safeParse({ a: { b: 1 } })
  t.match(describeFailure(parsed.error), /^a\.b: Invalid input: expected string/)
})

// Found in review of this change: enrolment now refuses a route an earlier one covers; a
// system enrolled before that must still export, and be mended by apply, not stop both.
t.test('a system enrolled before a newer check is exported and mended, not refused', async (t) => {
  const enrolled = {
    systemId: 'sys_a',
    version: 3,
    upstream: 'https://billing.example.com',
    reads: 'pass',
    routes: [
      { method: 'POST', path: '/v1/*', verb: 'verify' },
      { method: 'POST', path: '/v1/refunds', verb: 'refund' },
    ],
    tools: [],
  }
  const url = await holding(t, enrolled)
  const exported = await run(systemsExportCommand, url)
  t.equal(exported.code, 0, exported.err)
  t.match(exported.out, /path: \/v1\/refunds/)
  const applied = await run(systemsApplyCommand, url)
  t.equal(applied.code, 0, applied.err)
  t.match(applied.out, /~ sys_a \(update routes/)
})
