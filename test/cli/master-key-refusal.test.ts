import { randomBytes } from 'node:crypto'
import { existsSync, mkdtempSync, readFileSync, renameSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { PGlite } from '@electric-sql/pglite'
import t from 'tap'
import { createControlPlane } from '../../src/control/control-plane.js'
import { createLogger } from '../../src/observability/logger.js'
import { runCli } from '../helpers/cli.js'
import { Api, TEST_BACKUP_CODE_COST, testSettings } from '../helpers/control-plane.js'

// Found in review: a changed or regenerated master key was taken at start-up without a word, and
// every TOTP approval then answered 500 (the stored secrets no longer opened). A key that opens
// none of the stored secrets now stops start-up, in one line naming the setting.

function newKeyFile(dir: string, name: string): string {
  const path = join(dir, name)
  writeFileSync(path, `${randomBytes(32).toString('base64')}\n`, { mode: 0o600 })
  return path
}

/** A control plane on the embedded PGlite under `dataDir`, its master key as configured (no test keyring). */
async function startEmbedded(dataDir: string, masterKeyFile?: string) {
  return createControlPlane(
    testSettings({ dataDir, ...(masterKeyFile ? { secrets: { masterKeyFile } } : {}) }),
    { logger: createLogger('silent'), backupCodeCost: TEST_BACKUP_CODE_COST },
  )
}

/** `writegate start`, as an operator runs it; only ever expected to stop at start-up. */
const start = (env: Record<string, string>) =>
  runCli(['start'], {
    env: { WRITEGATE_PORT: '0', WRITEGATE_PROXY_PORT: '0', WRITEGATE_METRICS_PORT: '0', ...env },
  })

t.test('another master key than the one that sealed the stored TOTP secrets stops start-up', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'wg-mk-'))
  const keys = mkdtempSync(join(tmpdir(), 'wg-mk-keys-'))
  const keyA = newKeyFile(keys, 'a.key')
  const keyB = newKeyFile(keys, 'b.key')

  // Nothing sealed yet: any key starts.
  const empty = await startEmbedded(dir, keyB)
  await empty.close()

  const first = await startEmbedded(dir, keyA)
  const tenant = await new Api(first).newTenant()
  await first.close()

  const refused = await start({ WRITEGATE_DATA_DIR: dir, WRITEGATE_MASTER_KEY_FILE: keyB })
  t.equal(refused.code, 1)
  t.match(
    refused.stderr,
    new RegExp(
      `^writegate: invalid setting secrets\\.masterKeyFile \\(WRITEGATE_MASTER_KEY_FILE\\): ${keyB}: this key did not seal the secrets stored in the database \\(TOTP seeds\\): start with the key that did; if it is lost, see secrets\\.masterKeyFile in docs/configuration\\.md$`,
    ),
  )
  t.equal(refused.stderr.split('\n').length, 1, `one line, no stack: ${refused.stderr}`)
  t.equal(refused.stdout, '', 'nothing else is printed')

  // The key that sealed them starts, as before.
  const again = await startEmbedded(dir, keyA)
  await again.close()

  // The documented way out of a lost key (docs/configuration.md): delete the sealed secrets,
  // start with the new key, re-enrol.
  const pg = await PGlite.create(join(dir, 'pgdata'))
  await pg.exec('delete from tenant_totp')
  await pg.close()
  const recovered = await startEmbedded(dir, keyB)
  const enrol = await new Api(recovered).post('/v1/sponsor/totp', {}, { bearer: tenant.sponsorToken })
  t.equal(enrol.status, 200, JSON.stringify(enrol.body))
  await recovered.close()
  const afterwards = await startEmbedded(dir, keyB)
  await afterwards.close()
  t.pass('the new key starts once it sealed the stored secrets')
})

t.test('a deleted generated master.key is not generated again over sealed secrets', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'wg-mk-'))
  const keyFile = join(dir, 'master.key')
  const first = await startEmbedded(dir)
  await new Api(first).newTenant()
  await first.close()
  const original = readFileSync(keyFile)
  renameSync(keyFile, join(dir, 'master.key.moved'))

  for (let i = 0; i < 2; i++) {
    const refused = await start({ WRITEGATE_DATA_DIR: dir })
    t.equal(refused.code, 1)
    t.match(
      refused.stderr,
      /^writegate: invalid setting dataDir \(WRITEGATE_DATA_DIR\): the master key .*master\.key is missing and the database holds secrets sealed with it \(TOTP seeds\): put it back; /,
    )
    t.equal(refused.stderr.split('\n').length, 1, `one line, no stack: ${refused.stderr}`)
    t.notOk(existsSync(keyFile), 'the key generated in its place is taken back: the next start asks again')
  }

  renameSync(join(dir, 'master.key.moved'), keyFile)
  const back = await startEmbedded(dir)
  await back.close()
  t.same(readFileSync(keyFile), original, 'put back, it starts')
})
