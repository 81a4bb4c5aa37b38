import { execFileSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { parseSettings } from '../../src/config/load.js'
import {
  createCredentialResolver,
  MAX_SECRET_FILE_BYTES,
  readSecretFile,
} from '../../src/systems/credential-resolver.js'

/** The upstream every reference below is resolved for, unless a test says otherwise. */
const UP = 'https://api.github.example'
const dir = mkdtempSync(join(tmpdir(), 'wg-cred-'))
const allowed = join(dir, 'allowed')
const other = join(dir, 'other')
mkdirSync(allowed)
mkdirSync(other)
writeFileSync(join(allowed, 'token'), 'filesecret\n')
writeFileSync(join(other, 'master.key'), 'not-for-injection')
// A link inside the allowed directory that points out of it.
symlinkSync(join(other, 'master.key'), join(allowed, 'escape'))

const env = {
  BILLING_TOKEN: 's3cret',
  GITHUB_A: 'gh-a',
  WRITEGATE_DATABASE_URL: 'postgres://u:pw@db/x',
  BAD: 'a\r\nx: y',
  // The README's placeholder (`BILLING_API_TOKEN=…`): U+2026 is outside Latin-1.
  ELLIPSIS: '…',
  LATIN1: 'caf\u00e9',
  GITHUB_SPACED: '\tgh-spaced ',
}

t.test('a reference resolves only to a secret the process allows, with its prefix', async (t) => {
  const r = createCredentialResolver({
    env,
    allow: { env: ['BILLING_TOKEN', 'GITHUB_*', 'BAD', 'ELLIPSIS', 'LATIN1'], files: [allowed] },
  })
  t.same(
    r.resolve(
      'ten_a',
      { header: 'Authorization', prefix: 'Bearer ', fromEnv: 'BILLING_TOKEN' },
      { upstream: UP },
    ),
    {
      ok: true,
      header: 'authorization',
      value: 'Bearer s3cret',
      // What an answer must not carry back (the prefix is no secret).
      secret: 's3cret',
    },
  )
  t.match(r.resolve('ten_a', { header: 'x', prefix: '', fromEnv: 'GITHUB_A' }, { upstream: UP }), {
    ok: true,
    value: 'gh-a',
  })
  // An upstream reads a header without the whitespace at its ends: the secret it holds, and the
  // one answers are searched for, is the trimmed one (found in review: echoed past the guard).
  t.same(r.resolve('ten_a', { header: 'x', prefix: 'Bearer ', fromEnv: 'GITHUB_SPACED' }, { upstream: UP }), {
    ok: true,
    header: 'x',
    value: 'Bearer gh-spaced',
    secret: 'gh-spaced',
  })
  t.match(
    r.resolve('ten_a', { header: 'x', prefix: '', fromFile: join(allowed, 'token') }, { upstream: UP }),
    {
      ok: true,
      value: 'filesecret',
    },
  )
  // An admin naming what the operator did not set aside gets nothing: no exfiltration of settings.
  t.match(
    r.resolve('ten_a', { header: 'x', prefix: '', fromEnv: 'WRITEGATE_DATABASE_URL' }, { upstream: UP }),
    {
      ok: false,
      problem:
        /WRITEGATE_DATABASE_URL is not allowed by credentials\.allowEnv \(WRITEGATE_CREDENTIALS_ALLOW_ENV\)/,
    },
  )
  t.match(
    r.resolve('ten_a', { header: 'x', prefix: '', fromFile: join(other, 'master.key') }, { upstream: UP }),
    {
      ok: false,
      problem: /is not below a directory of credentials\.allowFiles/,
    },
  )
  t.match(
    r.resolve('ten_a', { header: 'x', prefix: '', fromFile: join(allowed, 'escape') }, { upstream: UP }),
    {
      ok: false,
      problem: /is not below a directory/,
    },
    'a symlink out of the allowed directory is followed, then refused',
  )
  t.match(
    r.resolve(
      'ten_a',
      { header: 'x', prefix: '', fromFile: join(allowed, '..', 'other', 'master.key') },
      { upstream: UP },
    ),
    { ok: false },
  )
  t.match(r.resolve('ten_a', { header: 'x', prefix: '', fromEnv: 'GITHUB_MISSING' }, { upstream: UP }), {
    ok: false,
    problem: /GITHUB_MISSING is not set/,
  })
  t.match(r.resolve('ten_a', { header: 'x', prefix: '', fromEnv: 'BAD' }, { upstream: UP }), {
    ok: false,
    problem: 'the secret holds a character a header cannot carry: a control character or one outside Latin-1',
  })
  t.match(
    r.resolve('ten_a', { header: 'x', prefix: '', fromEnv: 'ELLIPSIS' }, { upstream: UP }),
    { ok: false, problem: /a control character or one outside Latin-1/ },
    'a character above U+00FF is refused, and the problem says so',
  )
  t.match(
    r.resolve('ten_a', { header: 'x', prefix: '', fromEnv: 'LATIN1' }, { upstream: UP }),
    { ok: true, value: 'caf\u00e9' },
    'the rest of Latin-1 is sent',
  )
})

t.test('entries may be for one tenant; the operator file references are allowed as written', async (t) => {
  const r = createCredentialResolver({
    env,
    allow: { env: ['ten_a:BILLING_TOKEN'], files: [] },
    operatorRefs: [
      { tenantId: 'ten_a', ref: { header: 'x', prefix: '', fromEnv: 'GITHUB_A' }, to: { upstream: UP } },
    ],
  })
  t.match(r.resolve('ten_a', { header: 'x', prefix: '', fromEnv: 'BILLING_TOKEN' }, { upstream: UP }), {
    ok: true,
  })
  t.match(
    r.resolve('ten_b', { header: 'x', prefix: '', fromEnv: 'BILLING_TOKEN' }, { upstream: UP }),
    { ok: false },
    "another tenant cannot reach ten_a's secret",
  )
  t.match(r.resolve('ten_a', { header: 'x', prefix: '', fromEnv: 'GITHUB_A' }, { upstream: UP }), {
    ok: true,
  })
  // A tenant admin who names another tenant's file reference in a system of its own enrolment
  // would have writegate send that secret to its upstream.
  t.match(
    r.resolve('ten_b', { header: 'x', prefix: '', fromEnv: 'GITHUB_A' }, { upstream: UP }),
    { ok: false, problem: /not allowed/ },
    "ten_a's operator reference is no allowance for ten_b",
  )
})

t.test(
  "an operator file's reference holds only where its file sends it: origin, CA bundle, header, prefix",
  async (t) => {
    const ref = { header: 'x', prefix: '', fromEnv: 'GITHUB_A' }
    const r = createCredentialResolver({
      env,
      allow: { env: [], files: [] },
      operatorRefs: [{ tenantId: 'ten_a', ref, to: { upstream: `${UP}/v3` } }],
    })
    t.match(r.resolve('ten_a', ref, { upstream: `${UP}/graphql` }), { ok: true }, 'its origin, any path')
    for (const elsewhere of [
      'https://attacker.example',
      'http://api.github.example',
      'https://api.github.example:8443',
      'not a url',
    ])
      t.match(
        r.resolve('ten_a', ref, { upstream: elsewhere }),
        { ok: false, problem: /not allowed/ },
        elsewhere,
      )
    t.match(
      r.resolve('ten_a', ref, { upstream: UP, caBundle: '-----BEGIN CERTIFICATE-----' }),
      { ok: false },
      'a CA bundle of its own for that name: anyone it certifies would get the secret',
    )
    t.match(
      r.resolve('ten_a', { ...ref, header: 'x-debug' }, { upstream: UP }),
      { ok: false },
      'another header',
    )
    t.match(
      r.resolve('ten_a', { ...ref, prefix: 'token=' }, { upstream: UP }),
      { ok: false },
      'another prefix',
    )
    t.match(
      r.resolve('ten_a', { ...ref, header: 'X' }, { upstream: UP }),
      { ok: true },
      'header names are case-blind',
    )
  },
)

t.test("a routes file's references are its proxy's tenant's, once that is known", async (t) => {
  const ref = { header: 'x', prefix: '', fromEnv: 'GITHUB_A' }
  let bound: string | null = null
  const r = createCredentialResolver({
    env,
    allow: { env: [], files: [] },
    operatorRefs: [{ tenantId: null, ref, to: { upstream: UP } }],
    unboundTenant: () => bound,
  })
  t.match(r.resolve('ten_a', ref, { upstream: UP }), { ok: false }, 'before the file is enrolled: no tenant')
  bound = 'ten_a'
  t.match(r.resolve('ten_a', ref, { upstream: UP }), { ok: true }, "the proxy's tenant")
  t.match(r.resolve('ten_b', ref, { upstream: UP }), { ok: false }, 'no other tenant')
  // A standalone proxy serves one tenant: its routes file's references are that tenant's.
  const single = createCredentialResolver({
    env,
    allow: { env: [], files: [] },
    operatorRefs: [{ tenantId: null, ref, to: { upstream: UP } }],
  })
  t.match(single.resolve('ten_a', ref, { upstream: UP }), { ok: true })
})

t.test("writegate's own settings cannot be allowed for injection", async (t) => {
  for (const entry of ['WRITEGATE_DATABASE_URL', '*', 'W*', 'WRITEGATE_*', 'ten_a:WRITEGATE_REDIS_URL'])
    t.throws(
      () => parseSettings({ credentials: { allowEnv: [entry] } }),
      /credentials\.allowEnv.*WRITEGATE_/,
      entry,
    )
  for (const entry of ['WRITEGATE_CREDENTIAL_GITHUB', 'WRITEGATE_CREDENTIAL_*', 'BILLING_*', 'ten_a:X'])
    t.doesNotThrow(() => parseSettings({ credentials: { allowEnv: [entry] } }), entry)
})

/** Found in review: each of these was sent upstream, hung the process or told what exists. */
t.test(
  'a blank secret, a FIFO, a huge file and paths outside are refused without reading them',
  async (t) => {
    const blankEnv = { BLANK: '   ', EMPTY: '' }
    writeFileSync(join(allowed, 'blank'), '\n  \n')
    writeFileSync(join(allowed, 'huge'), Buffer.alloc(MAX_SECRET_FILE_BYTES + 1, 'a'))
    writeFileSync(join(allowed, 'largest'), Buffer.alloc(MAX_SECRET_FILE_BYTES, 'b'))
    execFileSync('mkfifo', [join(allowed, 'fifo')])
    const r = createCredentialResolver({
      env: blankEnv,
      allow: { env: ['BLANK', 'EMPTY'], files: [allowed] },
    })
    const ref = (over: Record<string, string>) => ({ header: 'authorization', prefix: 'Bearer ', ...over })
    t.match(r.resolve('ten_a', ref({ fromEnv: 'BLANK' }), { upstream: UP }), {
      ok: false,
      problem: /BLANK is not set or blank/,
    })
    t.match(r.resolve('ten_a', ref({ fromEnv: 'EMPTY' }), { upstream: UP }), {
      ok: false,
      problem: /EMPTY is not set or blank/,
    })
    t.match(r.resolve('ten_a', ref({ fromFile: join(allowed, 'blank') }), { upstream: UP }), {
      ok: false,
      problem: /is empty/,
    })
    t.match(
      r.resolve('ten_a', ref({ fromFile: join(allowed, 'huge') }), { upstream: UP }),
      { ok: false, problem: /larger than 65536 bytes/ },
      'a file past the limit is refused',
    )
    t.match(
      r.resolve('ten_a', ref({ fromFile: join(allowed, 'largest') }), { upstream: UP }),
      { ok: true },
      'one at the limit is read',
    )
    t.match(
      r.resolve('ten_a', ref({ fromFile: join(allowed, 'fifo') }), { upstream: UP }),
      { ok: false, problem: /not a regular file/ },
      'a FIFO is refused, not waited on',
    )
    // Outside every allowed directory, whether it exists or not: one answer, nothing looked up.
    for (const path of [join(other, 'master.key'), join(other, 'no-such-file'), '/root/.ssh/id_rsa'])
      t.match(
        r.resolve('ten_a', ref({ fromFile: path }), { upstream: UP }),
        { ok: false, problem: /is not below a directory of credentials\.allowFiles/ },
        path,
      )
  },
)

t.test(
  'the file opened is judged again: a directory swapped for a link after the check is caught',
  async (t) => {
    // The state a race leaves: the resolver judged `allowed/real/token` by its realpath, then `real`
    // became a link out before the open. The open follows it; the file opened is what counts.
    const base = mkdtempSync(join(tmpdir(), 'wg-cred-race-'))
    t.teardown(() => rmSync(base, { recursive: true, force: true }))
    const root = join(base, 'allowed')
    mkdirSync(root)
    mkdirSync(join(base, 'outside'))
    writeFileSync(join(base, 'outside', 'token'), 'OUTSIDE-SECRET')
    symlinkSync(join(base, 'outside'), join(root, 'real'))
    const judged = join(root, 'real', 'token')
    const insideRoot = (opened: string) => opened.startsWith(`${root}/`)
    const read = readSecretFile(judged, insideRoot)
    t.same(read, { ok: false, reason: 'moved out of its directory' })
    t.same(
      readSecretFile(judged, () => true),
      { ok: true, value: 'OUTSIDE-SECRET' },
      'what it would have read',
    )
  },
)
