import t from 'tap'
import { newApiKey } from '../../src/core/credentials.js'
import { hashSecret } from '../../src/core/secret-hash.js'
import { createAuthenticator } from '../../src/identity/authenticator.js'
import type { Stores } from '../../src/store/ports/index.js'

/** A key store that counts lookups; `revoked` keys resolve as revoked. */
function fakeStores(keys: string[], revoked = new Set<string>()) {
  let lookups = 0
  const byHash = new Map(keys.map((k, i) => [hashSecret(k), { k, i }]))
  const stores = {
    keys: {
      async resolve(hash: string) {
        lookups += 1
        const found = byHash.get(hash)
        if (!found) return null
        return {
          secretHash: hash,
          key: {
            id: `key_${found.i}`,
            tenantId: 'ten_a',
            principalId: `prn_${found.i}`,
            scope: 'agent',
            createdAt: 1,
            revokedAt: revoked.has(found.k) ? 2 : null,
          },
          principal: {
            id: `prn_${found.i}`,
            name: `p${found.i}`,
            disabled: false,
            createdAt: 1,
            deletedAt: null,
          },
        }
      },
    },
  } as unknown as Stores
  return {
    stores,
    get lookups() {
      return lookups
    },
  }
}

t.test('keyIdentity: looked up once, then kept, by the hash of the secret', async (t) => {
  const [a, b] = [newApiKey(), newApiKey()]
  const s = fakeStores([a, b], new Set([b]))
  const auth = createAuthenticator({ stores: s.stores })
  t.match(await auth.keyIdentity(a), { keyId: 'key_0', tenantId: 'ten_a', dead: null })
  t.match(await auth.keyIdentity(a), { keyId: 'key_0' })
  t.equal(s.lookups, 1, 'the second use costs no lookup')
  t.match(await auth.keyIdentity(b), { keyId: 'key_1', dead: null }, 'standing is not its to judge')
  t.match(await auth.apiKey(b), { keyId: 'key_1', dead: 'key_revoked' }, 'apiKey always looks up')
  t.equal(s.lookups, 3)
  t.equal(await auth.keyIdentity(newApiKey()), null, 'an unknown key')
  t.equal(await auth.keyIdentity('not-a-key'), null)
  t.equal(await auth.keyIdentity(undefined), null)
})

t.test('keyIdentity: unknown keys are not kept, and the cache is bounded', async (t) => {
  const keys = Array.from({ length: 5 }, () => newApiKey())
  const s = fakeStores(keys)
  const auth = createAuthenticator({ stores: s.stores, identityCacheSize: 3 })
  const stranger = newApiKey()
  await auth.keyIdentity(stranger)
  await auth.keyIdentity(stranger)
  t.equal(s.lookups, 2, 'a miss is looked up every time')
  for (const k of keys) await auth.keyIdentity(k)
  const before = s.lookups
  for (const k of keys.slice(2)) await auth.keyIdentity(k)
  t.equal(s.lookups, before, 'the three most recent are kept')
  await auth.keyIdentity(keys[0])
  t.equal(s.lookups, before + 1, 'the oldest was dropped')
})
