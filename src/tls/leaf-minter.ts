import { constants, webcrypto } from 'node:crypto'
import { createSecureContext, type SecureContext } from 'node:tls'
import type { InterceptionCa } from './interception-ca.js'
import { pemOfKey } from './interception-ca.js'

export interface LeafMinter {
  /** A TLS context presenting a fresh leaf for `host`; rejects for a host outside the CA's constraints. */
  contextFor(host: string): Promise<SecureContext>
}

/**
 * Leaf certificates minted on the fly for intercepted hosts: short-lived (`ttlSeconds`), one
 * key pair per process (only the certificate is per host), kept in a bounded cache until a
 * quarter of their life is left. Concurrent handshakes for one host share one minting.
 */
export async function createLeafMinter(
  ca: InterceptionCa,
  opts: { ttlSeconds: number; cacheSize: number },
): Promise<LeafMinter> {
  const keys = (await webcrypto.subtle.generateKey({ name: 'ECDSA', namedCurve: 'P-256' }, true, [
    'sign',
    'verify',
  ])) as webcrypto.CryptoKeyPair
  const keyPem = await pemOfKey(keys.privateKey)
  const cache = new Map<string, { context: Promise<SecureContext>; renewAt: number }>()
  return {
    contextFor(host) {
      const h = host.toLowerCase()
      const now = Date.now()
      const kept = cache.get(h)
      if (kept && kept.renewAt > now) return kept.context
      if (!ca.permits(h)) return Promise.reject(new Error(`${h} is outside the CA's name constraints`))
      const context = ca.issueLeaf(h, keys, opts.ttlSeconds).then((certPem) =>
        // The chain a client verifies: the leaf, then the CA it trusts.
        createSecureContext({
          key: keyPem,
          cert: `${certPem.trimEnd()}\n${ca.certPem.trimEnd()}\n`,
          minVersion: 'TLSv1.2',
          // TLS 1.2 renegotiation is refused by OpenSSL itself (a handshake in the middle of a
          // tunnel is no agent's; TLSSocket#disableRenegotiation does not stop a client's).
          secureOptions: constants.SSL_OP_NO_RENEGOTIATION,
        }),
      )
      context.catch(() => cache.delete(h))
      cache.delete(h)
      if (cache.size >= opts.cacheSize) cache.delete(cache.keys().next().value as string)
      cache.set(h, { context, renewAt: now + (opts.ttlSeconds * 1000 * 3) / 4 })
      return context
    },
  }
}
