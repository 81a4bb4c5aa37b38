import { generateKeyPairSync, randomBytes, scryptSync } from 'node:crypto'
import t from 'tap'
import { createControlPlane } from '../../src/control/control-plane.js'
import { createLogger } from '../../src/observability/logger.js'
import {
  BACKUP_CODE_COST,
  backupCodeMatches,
  hashBackupCode,
  newBackupCode,
} from '../../src/security/backup-codes.js'
import { deriveKeyring } from '../../src/security/keyring.js'
import { createSystemOfRecord } from '../../src/store/postgres/system-of-record.js'
import { openTestDatabase } from '../helpers/backends.js'
import { Api, testSettings } from '../helpers/control-plane.js'

t.test(
  'a hash names its cost; the code matches, in any case and spacing, and nothing else does',
  async (t) => {
    const code = newBackupCode()
    const { salt, hash } = await hashBackupCode(code)
    t.match(hash, /^\$scrypt\$ln=14,r=8,p=1\$[A-Za-z0-9+/]{43}=$/)
    t.equal(BACKUP_CODE_COST, 14)
    t.ok(await backupCodeMatches(code, salt, hash))
    t.ok(await backupCodeMatches(` ${code.toLowerCase().replace('-', ' ')} `, salt, hash))
    t.notOk(await backupCodeMatches(newBackupCode(), salt, hash))
    t.notOk(await backupCodeMatches(code, randomBytes(16).toString('base64'), hash), 'another salt')

    const cheap = await hashBackupCode(code, 10)
    t.match(cheap.hash, /^\$scrypt\$ln=10,/)
    t.ok(await backupCodeMatches(code, cheap.salt, cheap.hash), 'verified at the cost it names')
  },
)

t.test('a hash stored before hashes named their cost was made at 2^14, and still matches', async (t) => {
  const code = 'ABCDE-FGHJK'
  const salt = randomBytes(16)
  const legacy = scryptSync('ABCDEFGHJK', salt, 32, { N: 16384, r: 8, p: 1, maxmem: 64 * 1024 * 1024 })
  t.ok(await backupCodeMatches(code, salt.toString('base64'), legacy.toString('base64')))
  t.notOk(await backupCodeMatches('ABCDE-FGHJM', salt.toString('base64'), legacy.toString('base64')))
})

t.test(
  'a stored hash with a cost out of range, or none at all, matches nothing and throws nothing',
  async (t) => {
    const code = newBackupCode()
    const { salt, hash } = await hashBackupCode(code, 10)
    const digest = hash.slice(hash.lastIndexOf('$') + 1)
    for (const stored of [
      `$scrypt$ln=9,r=8,p=1$${digest}`,
      `$scrypt$ln=17,r=8,p=1$${digest}`,
      `$scrypt$ln=10,r=1,p=1$${digest}`,
      `$scrypt$ln=10,r=8,p=1$${digest.slice(4)}`,
      '',
      'not a hash',
    ])
      t.notOk(await backupCodeMatches(code, salt, stored), JSON.stringify(stored))
    for (const cost of [9, 17, 12.5, Number.NaN])
      await t.rejects(hashBackupCode(code, cost), RangeError, `cost ${cost}`)
  },
)

t.test('a control plane built without the tests override hashes new backup codes at 2^14', async (t) => {
  const db = await openTestDatabase('pglite-memory')
  t.teardown(() => db.close())
  const cp = await createControlPlane(testSettings(), {
    database: db.db,
    keyring: deriveKeyring(randomBytes(32)),
    logger: createLogger('silent'),
    auditSigningKey: generateKeyPairSync('ed25519').privateKey,
  })
  t.teardown(() => cp.close())
  const tenant = await new Api(cp).newTenant()
  const stored = await createSystemOfRecord(db.db).stores.totp.unusedBackupCodes(tenant.tenantId)
  t.equal(stored.length, 10)
  for (const c of stored) t.match(c.hash, /^\$scrypt\$ln=14,r=8,p=1\$/)
  const first = stored.find((c) => c.index === 0)
  t.ok(first && (await backupCodeMatches(tenant.totp.backupCodes[0] as string, first.salt, first.hash)))
})
