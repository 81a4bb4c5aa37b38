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

// Found in review: one byte repeated was taken as the key every token and sealed secret hangs on.
t.test('one byte repeated is refused, in any encoding', async (t) => {
  // 32 printable characters may be a key in use (`openssl rand -base64 24`, no newline): taken.
  t.equal(parseMasterKey(Buffer.from('q3Jd7Lw0x2mZ8vT1bN5cR9yH4kP6sF0a')).length, 32)
  t.throws(() => parseMasterKey(Buffer.alloc(32)), /one byte repeated/)
  t.throws(() => parseMasterKey(Buffer.from('00'.repeat(32))), /one byte repeated/, 'as hex too')
  t.throws(() => parseMasterKey(Buffer.from(Buffer.alloc(32, 7).toString('base64'))), /one byte repeated/)
})
