import { createPrivateKey, X509Certificate as NodeCertificate, webcrypto } from 'node:crypto'
import { isIP } from 'node:net'
import * as x509 from '@peculiar/x509'
import { isPermitted, nameConstraintsExtension, permittedDnsNames } from './name-constraints.js'

// @peculiar/x509 signs with WebCrypto; Node's is the standard one.
x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0])

type CryptoKey = webcrypto.CryptoKey
type CryptoKeyPair = webcrypto.CryptoKeyPair

const EC: webcrypto.EcKeyGenParams = { name: 'ECDSA', namedCurve: 'P-256' }
const SIGN: webcrypto.EcdsaParams = { name: 'ECDSA', hash: 'SHA-256' }

/** PEM of a PKCS#8 private key. */
async function pemOfKey(key: CryptoKey): Promise<string> {
  const der = await webcrypto.subtle.exportKey('pkcs8', key)
  const b64 = Buffer.from(der)
    .toString('base64')
    .replace(/(.{64})/g, '$1\n')
  return `-----BEGIN PRIVATE KEY-----\n${b64.replace(/\n$/, '')}\n-----END PRIVATE KEY-----\n`
}

function keyFromPem(pem: string): Promise<CryptoKey> {
  const b64 = pem.replace(/-----(BEGIN|END) PRIVATE KEY-----/g, '').replace(/\s+/g, '')
  return webcrypto.subtle.importKey('pkcs8', Buffer.from(b64, 'base64'), EC, true, ['sign'])
}

/** Why a host cannot be a name-constrained CA's: an IP literal, or not a DNS name. */
export function hostProblem(host: string): string | null {
  if (isIP(host.replace(/^\[|\]$/g, ''))) return 'an IP address (the CA vouches for DNS names only)'
  if (
    !/^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/i.test(host)
  )
    return 'not a DNS name'
  return null
}

/**
 * A new CA for TLS interception: ECDSA P-256, a CA for leaf certificates only (path length 0),
 * name-constrained to `hosts` and to no IP address. Its key never leaves the files it is
 * written to (the proxy's Secret).
 */
export async function createInterceptionCa(opts: {
  hosts: readonly string[]
  days: number
  name?: string
  now?: Date
}): Promise<{ certPem: string; keyPem: string }> {
  const hosts = [...new Set(opts.hosts.map((h) => h.toLowerCase()))]
  if (hosts.length === 0) throw new Error('at least one host is needed: the CA is constrained to them')
  for (const h of hosts) {
    const problem = hostProblem(h)
    if (problem) throw new Error(`${h}: ${problem}`)
  }
  const keys = (await webcrypto.subtle.generateKey(EC, true, ['sign', 'verify'])) as CryptoKeyPair
  const now = opts.now ?? new Date()
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: Buffer.from(webcrypto.getRandomValues(new Uint8Array(16)))
      .toString('hex')
      .replace(/^[89a-f]/, '7'),
    name: `CN=${opts.name ?? 'writegate interception CA'}`,
    notBefore: new Date(now.getTime() - 60_000),
    notAfter: new Date(now.getTime() + opts.days * 86_400_000),
    keys,
    signingAlgorithm: SIGN,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
      nameConstraintsExtension(hosts),
    ],
  })
  return { certPem: `${cert.toString('pem').trimEnd()}\n`, keyPem: await pemOfKey(keys.privateKey) }
}

export interface InterceptionCa {
  readonly certPem: string
  /** The DNS names the CA may vouch for. */
  readonly permitted: readonly string[]
  permits(host: string): boolean
  /** A leaf for `host`, signed by this CA; throws for a host outside its name constraints. */
  issueLeaf(host: string, leafKey: CryptoKeyPair, ttlSeconds: number): Promise<string>
}

/** Which of the CA's two files is wrong, so start-up names its setting. */
export class CaFileError extends Error {
  constructor(
    readonly file: 'cert' | 'key',
    message: string,
  ) {
    super(message)
  }
}

/** The CA the proxy mints leaves with; refuses a CA without name constraints, or another CA's key. */
export async function loadInterceptionCa(certPem: string, keyPem: string): Promise<InterceptionCa> {
  let cert: x509.X509Certificate
  try {
    cert = new x509.X509Certificate(certPem)
  } catch (err) {
    throw new CaFileError('cert', `not a PEM certificate (${(err as Error).message.split('\n')[0]})`)
  }
  const permitted = permittedDnsNames(cert)
  if (!permitted || permitted.length === 0)
    throw new CaFileError('cert', 'the CA certificate has no name constraints: it could vouch for any host')
  // Found in review: an expired CA was taken, the proxy said ready, and every client refused its
  // leaves. (One that expires while the proxy runs: its leaves end with it, below.)
  const loadedAt = Date.now()
  if (cert.notAfter.getTime() <= loadedAt)
    throw new CaFileError(
      'cert',
      `the CA certificate expired on ${cert.notAfter.toISOString()}: clients refuse what it signs (make a new one with writegate ca init)`,
    )
  if (cert.notBefore.getTime() > loadedAt)
    throw new CaFileError('cert', `the CA certificate is not valid until ${cert.notBefore.toISOString()}`)
  let caKey: CryptoKey
  try {
    caKey = await keyFromPem(keyPem)
  } catch (err) {
    throw new CaFileError(
      'key',
      `not an EC P-256 private key in PKCS#8 PEM (${(err as Error).message.split('\n')[0]})`,
    )
  }
  // Another CA's key would sign leaves no client verifies: every interception would fail.
  if (!new NodeCertificate(certPem).checkPrivateKey(createPrivateKey(keyPem)))
    throw new CaFileError('key', "the key is not the CA certificate's")
  const permits = (host: string) => hostProblem(host) === null && isPermitted(host, permitted)
  return {
    certPem,
    permitted,
    permits,
    async issueLeaf(host, leafKey, ttlSeconds) {
      if (!permits(host)) throw new Error(`${host} is outside the CA's name constraints`)
      const now = Date.now()
      const leaf = await x509.X509CertificateGenerator.create({
        serialNumber: Buffer.from(webcrypto.getRandomValues(new Uint8Array(16)))
          .toString('hex')
          .replace(/^[89a-f]/, '7'),
        subject: `CN=${host}`,
        issuer: cert.subject,
        notBefore: new Date(now - 60_000),
        // Never past the CA's own end: a client would refuse the leaf from then on anyway.
        notAfter: new Date(Math.min(now + ttlSeconds * 1000, cert.notAfter.getTime())),
        publicKey: leafKey.publicKey,
        signingKey: caKey,
        signingAlgorithm: SIGN,
        extensions: [
          new x509.BasicConstraintsExtension(false, undefined, true),
          new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
          new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
          new x509.SubjectAlternativeNameExtension([{ type: 'dns', value: host }]),
          await x509.AuthorityKeyIdentifierExtension.create(cert),
        ],
      })
      return `${leaf.toString('pem').trimEnd()}\n`
    },
  }
}

export { keyFromPem, pemOfKey }
