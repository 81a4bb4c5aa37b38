import { spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import fc from 'fast-check'
import t from 'tap'
import { exportCheckpointLine, exportHeaderLine } from '../../src/core/audit-export.js'
import { signCheckpoint } from '../../src/core/checkpoint.js'
import { parseEd25519PrivateKey, parseEd25519PublicKey, publicKeyId } from '../../src/core/ed25519.js'
import { canonicalJson } from '../../src/core/jcs.js'
import { chainReceipts, draft, EMPTY_HEAD } from '../../src/core/receipt.js'
import { signManifest } from '../../src/core/signed-manifest.js'
import { draftArb, ed25519, exportLines } from '../helpers/audit-logs.js'
import { openTestDatabase } from '../helpers/backends.js'
import { startControlPlane } from '../helpers/control-plane.js'

const root = join(import.meta.dirname, '..', '..')

function run(args: string[], env: Record<string, string> = {}) {
  const r = spawnSync(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', ...args], {
    cwd: root,
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '',
      WRITEGATE_CONFIG: join(root, 'config', 'writegate.yaml'),
      WRITEGATE_LOG_LEVEL: 'silent',
      ...env,
    },
    encoding: 'utf8',
    timeout: 120_000,
    maxBuffer: 64 * 1024 * 1024,
  })
  return { code: r.status, stderr: r.stderr.trim(), stdout: r.stdout.trim() }
}

const dir = mkdtempSync(join(tmpdir(), 'wg-audit-cli-'))

t.test('audit-keygen writes a private key (0600) and its public key, and never overwrites', async (t) => {
  const file = join(dir, 'audit.pem')
  const r = run(['audit-keygen', file])
  t.equal(r.code, 0, r.stderr)
  const priv = parseEd25519PrivateKey(readFileSync(file, 'utf8'))
  const pub = parseEd25519PublicKey(readFileSync(`${file}.pub`, 'utf8'))
  t.equal(publicKeyId(priv), publicKeyId(pub), 'the pair matches')
  t.equal(statSync(file).mode & 0o777, 0o600)
  t.match(r.stdout, new RegExp(`key id ${publicKeyId(pub)}`))
  const again = run(['audit-keygen', file])
  t.equal(again.code, 1)
  t.equal(again.stderr.split('\n').length, 1, again.stderr)
  t.match(again.stderr, /already exists; writegate never overwrites a key/)
})

t.test('writegate verify: exit 0 for an untouched export, 1 with one line for a tampered one', async (t) => {
  const file = join(dir, 'verify.pem')
  t.equal(run(['audit-keygen', file]).code, 0)
  const key = parseEd25519PrivateKey(readFileSync(file, 'utf8'))
  const { lines } = exportLines('ten_cli', fc.sample(draftArb('ten_cli'), 12), key)
  const good = join(dir, 'good.jsonl')
  writeFileSync(good, `${lines.join('\n')}\n`)
  const ok = run(['verify', good, '--public-key', `${file}.pub`])
  t.equal(ok.code, 0, ok.stdout + ok.stderr)
  t.match(ok.stdout, /^valid: tenant ten_cli, 12 receipts, head seq 12 /)

  const bad = join(dir, 'bad.jsonl')
  const tampered = [...lines]
  tampered.splice(6, 1) // delete receipt 5
  writeFileSync(bad, `${tampered.join('\n')}\n`)
  const no = run(['verify', bad, '--public-key', `${file}.pub`])
  t.equal(no.code, 1)
  t.equal(no.stdout, 'invalid: seq_gap at seq 5 (line 7): expected seq 5, found 6')
  t.equal(no.stderr, '')

  const other = join(dir, 'other.pem')
  run(['audit-keygen', other])
  const wrongKey = run(['verify', good, '--public-key', `${other}.pub`])
  t.equal(wrongKey.code, 1)
  t.match(wrongKey.stdout, /^invalid: checkpoint_signature_invalid/)

  t.equal(run(['verify', good]).code, 2, 'no public key')
  t.equal(run(['verify', join(dir, 'missing.jsonl'), '--public-key', `${file}.pub`]).code, 2)
  const directory = run(['verify', dir, '--public-key', `${file}.pub`])
  t.same(
    [directory.code, directory.stderr],
    [2, `writegate: verify: cannot read ${dir}: not a file`],
    'a directory',
  )
})

t.test('writegate verify reports progress on stderr for large files', async (t) => {
  const { privateKey, publicKey } = ed25519()
  const n = 60_000
  const drafts = Array.from({ length: n }, (_, i) =>
    draft({
      receiptId: `rcp_big${i}`,
      tenantId: 'ten_big',
      kind: 'CHECK',
      decision: 'ALLOW',
      createdAt: 1_800_000_000,
    }),
  )
  const { receipts, head } = chainReceipts(EMPTY_HEAD, drafts)
  const cp = signCheckpoint(privateKey, { tenantId: 'ten_big', seq: head.seq, hash: head.hash, at: 1 })
  const file = join(dir, 'big.jsonl')
  const pub = join(dir, 'big.pub')
  writeFileSync(pub, publicKey.export({ format: 'pem', type: 'spki' }))
  writeFileSync(
    file,
    `${[exportHeaderLine('ten_big'), exportCheckpointLine(cp), ...receipts.map((r) => canonicalJson(r))].join('\n')}\n`,
  )
  const r = run(['verify', file, '--public-key', pub])
  t.equal(r.code, 0, r.stdout)
  t.match(r.stderr, /^verified 50000 receipts \(\d+%\)$/)
  t.match(r.stdout, /60000 receipts/)
})

t.test('writegate manifests import: signed files only, for known tenants', async (t) => {
  const db = await openTestDatabase('postgres')
  t.teardown(() => db.close())
  const { api } = await startControlPlane(t, 'postgres', { db })
  const tenant = await api.newTenant()
  const scanner = ed25519()
  const scannerPub = join(dir, 'scanner.pub')
  writeFileSync(scannerPub, scanner.publicKey.export({ format: 'pem', type: 'spki' }))
  const env = { WRITEGATE_DATABASE_URL: db.url as string, WRITEGATE_SCANNER_PUBLIC_KEY_FILE: scannerPub }
  const entries = [
    { repoId: 'acme/api', commitSha: 'a1b2c3d4e5f6', scannerVersion: '2.1.0', createdAt: 1_800_000_000 },
    { repoId: 'acme/api', commitSha: 'ffee00112233', scannerVersion: '2.1.0', createdAt: 1_800_000_100 },
    { repoId: 'acme/web', commitSha: '0123456789ab', scannerVersion: '2.0.9', createdAt: 1_799_000_000 },
  ]
  const write = (name: string, doc: unknown) => {
    const p = join(dir, name)
    writeFileSync(p, JSON.stringify(doc))
    return p
  }
  const signed = signManifest(scanner.privateKey, { tenantId: tenant.tenantId, entries })

  const forged = write(
    'forged.json',
    signManifest(ed25519().privateKey, { tenantId: tenant.tenantId, entries }),
  )
  const edited = write('edited.json', { ...signed, entries: entries.slice(0, 1) })
  for (const [file, why] of [
    [forged, /bad signature/],
    [edited, /bad signature/],
  ] as const) {
    const r = run(['manifests', 'import', file], env)
    t.equal(r.code, 1)
    t.equal(r.stderr.split('\n').length, 1, r.stderr)
    t.match(r.stderr, why)
  }
  const unknownTenant = write(
    'unknown.json',
    signManifest(scanner.privateKey, { tenantId: 'ten_nobody', entries }),
  )
  t.match(
    run(['manifests', 'import', unknownTenant], env).stderr,
    /unknown tenant ten_nobody; nothing was imported$/,
  )
  const badShape = write(
    'shape.json',
    signManifest(scanner.privateKey, { tenantId: tenant.tenantId, entries: [{ repoId: 'x' }] }),
  )
  t.match(
    run(['manifests', 'import', badShape], env).stderr,
    /^writegate: refused .*: invalid manifest: entries\.0\./,
  )
  t.same((await api.get('/v1/manifests', { bearer: tenant.apiKey })).body.repos, [], 'nothing stored')

  const noKey = run(['manifests', 'import', forged], { WRITEGATE_DATABASE_URL: db.url as string })
  t.equal(
    noKey.stderr,
    'writegate: invalid setting manifests.scannerPublicKeyFile (WRITEGATE_SCANNER_PUBLIC_KEY_FILE): required to import manifests',
  )

  const good = write('good.json', signed)
  const ok = run(['manifests', 'import', good], env)
  t.equal(ok.code, 0, ok.stderr)
  t.match(ok.stdout, /imported 3 of 3 manifest entries/)
  t.match(run(['manifests', 'import', good], env).stdout, /imported 0 of 3/, 're-importing adds nothing')
  const r = await api.get('/v1/manifests', { bearer: tenant.apiKey })
  t.equal(r.status, 200)
  t.same(r.body, { tenantId: tenant.tenantId, repos: [entries[1], entries[2]] }, 'the latest entry per repo')
  const other = await api.newTenant()
  t.same((await api.get('/v1/manifests', { bearer: other.apiKey })).body.repos, [], 'per tenant')
  t.equal((await api.get('/v1/manifests')).status, 401)
  t.equal((await api.post('/v1/manifests', {}, { bearer: tenant.apiKey })).status, 404, 'read-only over HTTP')
})
