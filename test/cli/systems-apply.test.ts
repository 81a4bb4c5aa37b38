import { execFile } from 'node:child_process'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import t from 'tap'
import { parse, stringify } from 'yaml'
import { systemsApplyCommand, systemsExportCommand } from '../../src/cli/systems-apply.js'
import { createInterceptionCa } from '../../src/tls/interception-ca.js'
import { recordedIo } from '../helpers/cli.js'
import { startControlPlane } from '../helpers/control-plane.js'

const root = join(import.meta.dirname, '..', '..')
const dir = mkdtempSync(join(tmpdir(), 'wg-apply-'))

const system = (id: string, over: Record<string, unknown> = {}) => ({
  systemId: id,
  upstream: 'https://billing.example.com',
  credential: { header: 'authorization', prefix: 'Bearer ', fromEnv: 'BILLING_API_TOKEN' },
  routes: [{ method: 'POST', path: '/v1/refunds', verb: 'refund' }],
  ...over,
})

function file(systems: unknown[]): string {
  const p = join(dir, `${Math.random().toString(36).slice(2)}.yaml`)
  writeFileSync(p, stringify({ systems }))
  return p
}

t.test('writegate systems apply / export against a running control plane', async (t) => {
  const { api, cp } = await startControlPlane(t, 'fake', {
    settings: { server: { port: 0, host: '127.0.0.1' } },
  })
  const url = await cp.listen()
  const tenant = await api.newTenant()
  const env = { WRITEGATE_API_KEY: tenant.apiKey }
  const run = async (
    options: Record<string, string | undefined>,
    command = systemsApplyCommand,
    apiKey = tenant.apiKey,
  ) => {
    const { io, out, err } = recordedIo()
    const code = await command({ url, ...options }, io, { ...env, WRITEGATE_API_KEY: apiKey })
    return { code, out: out(), err: err() }
  }

  t.test('creates, then changes nothing the second time', async (t) => {
    const f = file([system('sys_a'), system('sys_b')])
    const first = await run({ file: f })
    t.equal(first.code, 0)
    t.match(first.out, /\+ sys_a \(create\)\n\+ sys_b \(create\)\napplied 2 change\(s\)/)
    const again = await run({ file: f })
    t.match(
      again.out,
      /= sys_a \(unchanged, version 1\)\n= sys_b \(unchanged, version 1\)\napplied 0 change\(s\)/,
    )
    t.same(
      (await api.get('/v1/systems', { bearer: tenant.apiKey })).body.systems.map(
        (s: { systemId: string }) => s.systemId,
      ),
      ['sys_a', 'sys_b'],
    )
  })

  // Found in review: GET /v1/systems left out kind, mcp, graphql and caBundle, so every apply
  // re-sent an MCP or GraphQL system (a new version, which refuses its staged actions), and any
  // change applied dropped a caBundle.
  t.test(
    'an MCP system and a caBundle survive applies: unchanged is unchanged, a change keeps the bundle',
    async (t) => {
      const own = await api.newTenant()
      const apply = (systems: unknown[]) => run({ file: file(systems) }, systemsApplyCommand, own.apiKey)
      const { certPem: caPem } = await createInterceptionCa({
        hosts: ['billing.example.com'],
        days: 1,
        name: 'apply CA',
      })
      const mcp = system('sys_mcp', {
        kind: 'mcp',
        upstream: 'https://tools.example.com',
        routes: [],
        mcp: { endpoint: '/mcp', tools: [{ name: 'create_*', verb: 'refund' }], filterToolsList: true },
      })
      const bundled = system('sys_ca', { caBundle: caPem })
      const first = await apply([mcp, bundled])
      t.equal(first.code, 0, first.err)
      const again = await apply([mcp, bundled])
      t.match(again.out, /= sys_mcp \(unchanged, version 1\)\n= sys_ca \(unchanged, version 1\)/)
      const got = (await api.get('/v1/systems/sys_mcp', { bearer: own.apiKey })).body
      t.match(got, { kind: 'mcp', mcp: { endpoint: '/mcp', filterToolsList: true } }, 'GET shows the binding')
      const changed = system('sys_ca', {
        caBundle: caPem,
        routes: [{ method: 'POST', path: '/v1/refunds/{id}', verb: 'refund' }],
      })
      const update = await apply([mcp, changed])
      t.match(update.out, /~ sys_ca/)
      const after = (await api.get('/v1/systems/sys_ca', { bearer: own.apiKey })).body
      t.same([after.version, after.caBundle], [2, caPem], 'the change applied, its bundle kept')
    },
  )

  t.test('a diff, --dry-run changes nothing, then updates by ifVersion and --prune deletes', async (t) => {
    const f = file([system('sys_a', { reads: 'gate' }), system('sys_c')])
    const dry = await run({ file: f, 'dry-run': 'true', prune: 'true' })
    t.match(dry.out, /~ sys_a \(update reads: version 1 → 2\)/)
    t.match(dry.out, /\+ sys_c \(create\)/)
    t.match(dry.out, /- sys_b \(delete, version 1\)/)
    t.match(dry.out, /dry run: 3 change\(s\) not made/)
    t.equal(
      (await api.get('/v1/systems/sys_a', { bearer: tenant.apiKey })).body.version,
      1,
      'nothing changed',
    )
    const noPrune = await run({ file: f })
    t.match(noPrune.out, /\? sys_b \(enrolled, not in the file; --prune deletes it\)/)
    const pruned = await run({ file: f, prune: 'true' })
    t.match(pruned.out, /- sys_b/)
    t.same(
      (await api.get('/v1/systems', { bearer: tenant.apiKey })).body.systems.map(
        (s: { systemId: string; version: number }) => [s.systemId, s.version],
      ),
      [
        ['sys_a', 2],
        ['sys_c', 1],
      ],
    )
  })

  t.test('export prints what apply reads: applying it changes nothing', async (t) => {
    const out = await run({}, systemsExportCommand)
    t.equal(out.code, 0)
    const exported = parse(out.out) as { systems: { systemId: string }[] }
    t.same(
      exported.systems.map((s) => s.systemId),
      ['sys_a', 'sys_c'],
    )
    t.notOk(out.out.includes('version'), 'no versions or timestamps')
    const back = await run({ file: file(exported.systems) })
    t.match(back.out, /applied 0 change\(s\)/)
  })

  t.test('refusals are one line: a bad file, another tenant, the API saying no, no key', async (t) => {
    const bad = await run({
      file: file([system('sys_d', { routes: [{ method: 'POST', path: '/x', verb: 'made.up' }] })]),
    })
    t.equal(bad.code, 1)
    t.match(
      bad.err,
      /^writegate: POST \/v1\/systems: 400 unknown_verb unknown verb: routes\.0\.verb: made\.up/,
    )
    t.equal(bad.err.trim().split('\n').length, 1)
    await t.rejects(
      run({ file: file([{ ...system('sys_e'), tenantId: 'ten_other' }]) }),
      /tenantId ten_other is not the key's tenant/,
    )
    const unreachable = await systemsApplyCommand(
      { file: file([system('sys_f')]), url: 'http://127.0.0.1:9' },
      {
        stdout: () => {},
        stderr: (s) => t.match(s, /cannot reach the control plane at http:\/\/127\.0\.0\.1:9/),
        stderrIsTty: false,
        stdin: process.stdin,
      },
      env,
    )
    t.equal(unreachable, 1)
    await t.rejects(
      run({ file: file([system('sys_g')]) }, (o, io) => systemsApplyCommand(o, io, {})),
      /an admin API key is needed/,
    )
  })

  t.test('no secret is printed back: a URL with a password, a key file of several lines', async (t) => {
    const keyFile = join(dir, 'two-lines.key')
    writeFileSync(keyFile, `${tenant.apiKey}\nsvc_other_secret\n`)
    const attempts: [Record<string, string>, RegExp][] = [
      [{ 'api-key-file': keyFile }, /--api-key-file: .*two-lines\.key does not hold one API key/],
      [{ url: 'http://user:S3cretPW@127.0.0.1:9' }, /--url \(or WRITEGATE_URL\): must not carry credentials/],
      [{ url: 'http://S3cretPW@[nope' }, /--url \(or WRITEGATE_URL\): not a URL$/],
    ]
    for (const [options, message] of attempts) {
      const failed = await run({ file: file([system('sys_h')]), ...options }).catch((err: Error) => ({
        err: err.message,
      }))
      t.match(failed.err, message)
      t.notMatch(failed.err, /S3cretPW|svc_other_secret/, 'nothing of the secret')
    }
  })

  t.test('the command line, through the launcher: -f and --help', async (t) => {
    const f = file([system('sys_a', { reads: 'gate' }), system('sys_c')])
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ['bin/writegate.js', 'systems', 'apply', '-f', f, '--dry-run'],
      {
        cwd: root,
        env: { PATH: process.env.PATH ?? '', WRITEGATE_URL: url, WRITEGATE_API_KEY: tenant.apiKey },
      },
    )
    t.match(stdout, /= sys_a \(unchanged, version 2\)\n= sys_c \(unchanged, version 1\)/)
    const help = await promisify(execFile)(
      process.execPath,
      ['bin/writegate.js', 'systems', 'apply', '--help'],
      { cwd: root },
    )
    t.match(help.stdout, /^Usage: writegate systems apply -f <file> \[--dry-run\] \[--prune\]/)
  })
})
