import { mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { loadSettings } from '../../src/config/load.js'
import { publicKeyId } from '../../src/core/ed25519.js'
import { newAuditSigningKeyPem, resolveAuditSigningKey } from '../../src/security/audit-signing-key.js'

const dir = () => mkdtempSync(join(tmpdir(), 'wg-audit-key-'))

t.test(
  'a configured key file is used, and a bad one is a one-line ConfigError naming the setting',
  async (t) => {
    const d = dir()
    const file = join(d, 'k.pem')
    const { privatePem } = newAuditSigningKeyPem()
    writeFileSync(file, privatePem)
    const key = resolveAuditSigningKey(file, { kind: 'postgres', url: 'postgres://x' }, d)
    t.equal(key.asymmetricKeyType, 'ed25519')
    writeFileSync(join(d, 'bad.pem'), 'not a key')
    for (const [f, why] of [
      [join(d, 'bad.pem'), /not a PEM PKCS#8 Ed25519 private key$/],
      [join(d, 'missing.pem'), /: ENOENT$/],
    ] as const) {
      t.throws(() => resolveAuditSigningKey(f, { kind: 'pglite-memory' }, d), {
        name: 'ConfigError',
        message: why,
      })
    }
    t.throws(() => resolveAuditSigningKey(join(d, 'bad.pem'), { kind: 'pglite-memory' }, d), {
      message: /^invalid setting audit\.signingKeyFile \(WRITEGATE_AUDIT_SIGNING_KEY_FILE\): /,
    })
  },
)

t.test('embedded PGlite on disk generates a key beside its data once, then reuses it', async (t) => {
  const d = dir()
  const first = resolveAuditSigningKey(undefined, { kind: 'pglite-disk', dir: join(d, 'pgdata') }, d)
  const again = resolveAuditSigningKey(undefined, { kind: 'pglite-disk', dir: join(d, 'pgdata') }, d)
  t.equal(publicKeyId(first), publicKeyId(again))
  t.equal(statSync(join(d, 'audit-signing.pem')).mode & 0o777, 0o600)
  t.match(readFileSync(join(d, 'audit-signing.pem'), 'utf8'), /^-----BEGIN PRIVATE KEY-----/)
})

t.test('memory:// gets an ephemeral key; a Postgres server requires the file', async (t) => {
  const d = dir()
  const a = resolveAuditSigningKey(undefined, { kind: 'pglite-memory' }, d)
  const b = resolveAuditSigningKey(undefined, { kind: 'pglite-memory' }, d)
  t.not(publicKeyId(a), publicKeyId(b))
  t.throws(() => resolveAuditSigningKey(undefined, { kind: 'postgres', url: 'postgres://x' }, d), {
    name: 'ConfigError',
    message:
      'invalid setting audit.signingKeyFile (WRITEGATE_AUDIT_SIGNING_KEY_FILE): required when database.url points at a Postgres server (generate one with `writegate audit-keygen <file>`)',
  })
})

t.test('audit and manifests settings come from the environment', async (t) => {
  const s = loadSettings({
    WRITEGATE_CONFIG: join(import.meta.dirname, '..', '..', 'config', 'writegate.yaml'),
    WRITEGATE_AUDIT_SIGNING_KEY_FILE: '/k.pem',
    WRITEGATE_AUDIT_CHECKPOINT_INTERVAL_SECONDS: '30',
    WRITEGATE_SCANNER_PUBLIC_KEY_FILE: '/s.pub',
  })
  t.same(s.audit, { signingKeyFile: '/k.pem', checkpointIntervalSeconds: 30, streamKeepaliveSeconds: 15 })
  t.same(s.manifests, { scannerPublicKeyFile: '/s.pub' })
  t.throws(
    () =>
      loadSettings({
        WRITEGATE_CONFIG: join(import.meta.dirname, '..', '..', 'config', 'writegate.yaml'),
        WRITEGATE_AUDIT_CHECKPOINT_INTERVAL_SECONDS: '0',
      }),
    {
      message:
        /^invalid setting audit\.checkpointIntervalSeconds \(WRITEGATE_AUDIT_CHECKPOINT_INTERVAL_SECONDS\)/,
    },
  )
})
