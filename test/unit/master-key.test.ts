import { randomBytes } from 'node:crypto'
import t from 'tap'
import { parseMasterKey } from '../../src/security/keyring.js'

t.test('a master key is 32 random bytes, raw, hex or base64', async (t) => {
  const key = randomBytes(32)
  t.same(parseMasterKey(key), key)
  t.same(parseMasterKey(Buffer.from(`${key.toString('hex')}\n`)), key)
  t.same(parseMasterKey(Buffer.from(`${key.toString('base64')}\n`)), key)
  t.throws(() => parseMasterKey(Buffer.from('short')), /expected 32 bytes/)
})

// Found in review: each of these was taken as the key every token and sealed secret hangs on.
t.test('what is plainly not random is refused', async (t) => {
  t.throws(
    () => parseMasterKey(Buffer.from('correct-horse-battery-staple-123')),
    /a passphrase rather than a key/,
  )
  t.throws(() => parseMasterKey(Buffer.alloc(32)), /one byte repeated/)
  t.throws(() => parseMasterKey(Buffer.from('00'.repeat(32))), /one byte repeated/, 'as hex too')
  t.throws(() => parseMasterKey(Buffer.from(Buffer.alloc(32, 7).toString('base64'))), /one byte repeated/)
})
