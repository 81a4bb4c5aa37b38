import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { COMMANDS } from '../../src/cli/commands.js'
import { type CliResult, inPairs, runCli } from '../helpers/cli.js'

const oneLine = (r: CliResult) => r.stderr.split('\n').length === 1

t.test('every command prints its own usage for --help and -h, exit 0, and does nothing else', async (t) => {
  const runs = COMMANDS.flatMap((c) => [
    { command: c, flag: '--help' },
    { command: c, flag: '-h' },
  ])
  await inPairs(runs, async ({ command, flag }) => {
    // An empty directory as cwd and a data dir that does not exist yet: nothing may appear.
    const cwd = mkdtempSync(join(tmpdir(), 'wg-usage-'))
    const dataDir = join(cwd, 'data')
    // Arguments that would make the command do its work, and the flag after them.
    const args = [...command.name.split(' '), ...command.positionals.map((p) => `x-${p}`), flag]
    const r = await runCli(args, {
      cwd,
      env: { WRITEGATE_DATA_DIR: dataDir, WRITEGATE_PORT: '0', WRITEGATE_PROXY_PORT: '0' },
    })
    const what = `writegate ${args.join(' ')}`
    t.equal(r.code, 0, `${what}: ${r.stderr}`)
    t.match(r.stdout, new RegExp(`^Usage: writegate ${command.name}( |\\n)`), `${what}: its own usage`)
    t.equal(r.stderr, '', `${what}: nothing on stderr`)
    t.same(readdirSync(cwd), [], `${what}: wrote nothing`)
  })
})

t.test('writegate help lists every command, and help <command> prints its usage', async (t) => {
  const [all, one, bad] = await Promise.all([
    runCli(['help']),
    runCli(['help', 'manifests', 'import']),
    runCli(['help', 'frobnicate']),
  ])
  t.equal(all.code, 0)
  for (const c of COMMANDS) t.match(all.stdout, new RegExp(`^ {2}${c.name}( |$)`, 'm'), c.name)
  t.equal(one.code, 0)
  t.match(one.stdout, /^Usage: writegate manifests import <file>\n/)
  t.equal(bad.code, 2)
  t.equal(bad.stderr, 'writegate: help: unknown command "frobnicate" (try: writegate help)')
})

t.test('a command line that does not fit is one line naming the problem, exit 2', async (t) => {
  const cwd = mkdtempSync(join(tmpdir(), 'wg-usage-'))
  const cases: [string[], string][] = [
    [['keygen', '--force', 'k'], 'writegate: keygen: unknown option --force (see: writegate keygen --help)'],
    [['keygen'], 'writegate: keygen: missing <file> (see: writegate keygen --help)'],
    [['keygen', 'a', 'b'], 'writegate: keygen: unexpected argument b (see: writegate keygen --help)'],
    [
      ['migrate', '--dry-run'],
      'writegate: migrate: unknown option --dry-run (see: writegate migrate --help)',
    ],
    [['start', '--port', '80'], 'writegate: start: unknown option --port (see: writegate start --help)'],
    [['verify', 'x.jsonl'], 'writegate: verify: missing --public-key <file> (see: writegate verify --help)'],
    [
      ['verify', 'x.jsonl', '--public-key'],
      'writegate: verify: option --public-key needs a value (see: writegate verify --help)',
    ],
    [['manifests'], 'writegate: manifests: missing a subcommand (try: writegate help manifests)'],
    [['frobnicate'], 'writegate: unknown command "frobnicate" (try: writegate help)'],
  ]
  const results = await inPairs(cases, ([args]) => runCli(args, { cwd }))
  cases.forEach(([args, message], i) => {
    const r = results[i] as CliResult
    t.equal(r.code, 2, args.join(' '))
    t.equal(r.stderr, message)
    t.equal(r.stdout, '')
  })
  t.same(readdirSync(cwd), [], 'nothing was written')
})

t.test('a key is never written over an existing file: one clear line, exit 1', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'wg-usage-'))
  const master = join(dir, 'master.key')
  writeFileSync(master, 'keep me\n')
  const audit = join(dir, 'audit.pem')
  writeFileSync(`${audit}.pub`, 'keep me too\n')
  const [keygen, auditKeygen, noDir] = await Promise.all([
    runCli(['keygen', master]),
    runCli(['audit-keygen', audit]),
    runCli(['keygen', join(dir, 'missing', 'master.key')]),
  ])
  t.equal(keygen.code, 1)
  t.equal(
    keygen.stderr,
    `writegate: ${master} already exists; writegate never overwrites a key (move it away or name another file)`,
  )
  t.equal(readFileSync(master, 'utf8'), 'keep me\n')
  t.equal(auditKeygen.code, 1)
  t.ok(oneLine(auditKeygen), auditKeygen.stderr)
  t.match(auditKeygen.stderr, `writegate: ${audit}.pub already exists;`)
  t.notOk(existsSync(audit), 'no private key is left without its public key')
  t.equal(readFileSync(`${audit}.pub`, 'utf8'), 'keep me too\n')
  t.equal(noDir.code, 1)
  t.match(noDir.stderr, /^writegate: cannot write .*master\.key: its directory does not exist$/)
})
