import { execFileSync } from 'node:child_process'
import { webcrypto, X509Certificate } from 'node:crypto'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import * as x509 from '@peculiar/x509'
import t from 'tap'
import { createInterceptionCa, keyFromPem, loadInterceptionCa } from '../../src/tls/interception-ca.js'
import { createLeafMinter } from '../../src/tls/leaf-minter.js'

const dir = mkdtempSync(join(tmpdir(), 'wg-ca-'))
const file = (name: string, text: string) => {
  const p = join(dir, name)
  writeFileSync(p, text)
  return p
}
/** openssl's verdict on `leafPem` against `caPem` as the only trust anchor. */
const verify = (caPem: string, leafPem: string, host: string) => {
  try {
    execFileSync(
      'openssl',
      [
        'verify',
        '-CAfile',
        file('ca.pem', caPem),
        /^[\d.]+$/.test(host) ? '-verify_ip' : '-verify_hostname',
        host,
        file('leaf.pem', leafPem),
      ],
      { stdio: 'pipe' },
    )
    return 'ok'
  } catch (err) {
    const e = err as { stdout?: Buffer; stderr?: Buffer }
    return `${e.stdout ?? ''}${e.stderr ?? ''}` || String(err)
  }
}

t.test('the CA is name-constrained to the enrolled hosts and to no IP address', async (t) => {
  const { certPem } = await createInterceptionCa({
    hosts: ['api.github.com', 'Billing.Example.com'],
    days: 30,
  })
  const text = execFileSync('openssl', [
    'x509',
    '-noout',
    '-text',
    '-in',
    file('ca-text.pem', certPem),
  ]).toString()
  t.match(text, /X509v3 Name Constraints: critical/)
  t.match(text, /Permitted:\s+DNS:api\.github\.com\s+DNS:billing\.example\.com/)
  t.match(text, /Excluded:\s+IP:0\.0\.0\.0\/0\.0\.0\.0\s+IP:(0:){7}0\/(0:){7}0/)
  t.match(text, /CA:TRUE, pathlen:0/)
  const node = new X509Certificate(certPem)
  t.ok(node.ca, 'a CA certificate')
  await t.rejects(createInterceptionCa({ hosts: ['10.0.0.1'], days: 1 }), /IP address/)
  await t.rejects(createInterceptionCa({ hosts: [], days: 1 }), /at least one host/)
})

t.test('leaves are minted for permitted hosts only, and verify against the CA alone', async (t) => {
  const made = await createInterceptionCa({ hosts: ['api.github.com', 'example.org'], days: 30 })
  const ca = await loadInterceptionCa(made.certPem, made.keyPem)
  const keys = (await webcrypto.subtle.generateKey({ name: 'ECDSA', namedCurve: 'P-256' }, true, [
    'sign',
    'verify',
  ])) as webcrypto.CryptoKeyPair
  const leaf = await ca.issueLeaf('api.github.com', keys, 3600)
  t.equal(verify(made.certPem, leaf, 'api.github.com'), 'ok')
  t.equal(
    verify(made.certPem, await ca.issueLeaf('uploads.example.org', keys, 3600), 'uploads.example.org'),
    'ok',
    'a subdomain',
  )
  for (const host of ['evil.com', 'github.com', 'api.github.com.evil.com', '127.0.0.1'])
    await t.rejects(ca.issueLeaf(host, keys, 3600), /outside the CA's name constraints/, host)
  const minter = await createLeafMinter(ca, { ttlSeconds: 3600, cacheSize: 2 })
  await t.rejects(minter.contextFor('evil.com'), /outside/)
  t.ok(await minter.contextFor('api.github.com'))

  // A leaf forced past the check (signed with the CA key by hand) is refused by a client.
  const caKey = await keyFromPem(made.keyPem)
  const caCert = new x509.X509Certificate(made.certPem)
  for (const [host, san] of [
    ['evil.com', { type: 'dns' as const, value: 'evil.com' }],
    ['127.0.0.1', { type: 'ip' as const, value: '127.0.0.1' }],
  ] as const) {
    const forced = await x509.X509CertificateGenerator.create({
      serialNumber: '01',
      subject: `CN=${host}`,
      issuer: caCert.subject,
      notBefore: new Date(Date.now() - 60_000),
      notAfter: new Date(Date.now() + 3_600_000),
      publicKey: keys.publicKey,
      signingKey: caKey,
      signingAlgorithm: { name: 'ECDSA', hash: 'SHA-256' },
      extensions: [new x509.SubjectAlternativeNameExtension([san])],
    })
    const verdict = verify(made.certPem, forced.toString('pem'), host)
    t.match(verdict, /name constraint|permitted subtree|excluded subtree/i, `${host}: rejected by openssl`)
  }
})

t.test('a CA without name constraints is refused', async (t) => {
  const keys = (await webcrypto.subtle.generateKey({ name: 'ECDSA', namedCurve: 'P-256' }, true, [
    'sign',
    'verify',
  ])) as webcrypto.CryptoKeyPair
  const plain = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: '01',
    name: 'CN=plain',
    notBefore: new Date(),
    notAfter: new Date(Date.now() + 3_600_000),
    keys,
    signingAlgorithm: { name: 'ECDSA', hash: 'SHA-256' },
    extensions: [new x509.BasicConstraintsExtension(true, 0, true)],
  })
  await t.rejects(loadInterceptionCa(plain.toString('pem'), 'unused'), /no name constraints/)
})

// Found in review: an expired CA was taken at start-up (every client then refused its leaves), and
// a leaf could outlive its CA.
t.test('an expired or not yet valid CA is refused; a leaf ends with its CA', async (t) => {
  const day = 86_400_000
  const expired = await createInterceptionCa({
    hosts: ['localhost'],
    days: 1,
    now: new Date(Date.now() - 10 * day),
  })
  await t.rejects(loadInterceptionCa(expired.certPem, expired.keyPem), {
    file: 'cert',
    message: /expired on/,
  })
  const future = await createInterceptionCa({
    hosts: ['localhost'],
    days: 1,
    now: new Date(Date.now() + day),
  })
  await t.rejects(loadInterceptionCa(future.certPem, future.keyPem), {
    file: 'cert',
    message: /not valid until/,
  })
  const ending = await createInterceptionCa({ hosts: ['localhost'], days: 1 })
  const ca = await loadInterceptionCa(ending.certPem, ending.keyPem)
  const keys = (await webcrypto.subtle.generateKey({ name: 'ECDSA', namedCurve: 'P-256' }, true, [
    'sign',
    'verify',
  ])) as webcrypto.CryptoKeyPair
  const leaf = new x509.X509Certificate(await ca.issueLeaf('localhost', keys, 7 * 86_400))
  const caEnd = new x509.X509Certificate(ending.certPem).notAfter.getTime()
  t.ok(leaf.notAfter.getTime() <= caEnd, 'a week-long leaf asked of a CA with a day left ends with the CA')
})

// Found in review: another CA's key was taken, and every leaf it signed failed verification.
t.test("another CA's key, or no key at all, is refused, naming the key file", async (t) => {
  const a = await createInterceptionCa({ hosts: ['localhost'], days: 1 })
  const b = await createInterceptionCa({ hosts: ['localhost'], days: 1 })
  await t.resolves(loadInterceptionCa(a.certPem, a.keyPem), 'its own key')
  await t.rejects(loadInterceptionCa(a.certPem, b.keyPem), {
    file: 'key',
    message: /not the CA certificate's/,
  })
  await t.rejects(loadInterceptionCa(a.certPem, a.certPem), {
    file: 'key',
    message: /not an EC P-256 private key/,
  })
  await t.rejects(loadInterceptionCa('not a certificate', a.keyPem), {
    file: 'cert',
    message: /not a PEM certificate/,
  })
})
