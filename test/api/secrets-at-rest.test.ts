import t from 'tap'
import { API_BACKENDS } from '../helpers/backends.js'
import { startControlPlane } from '../helpers/control-plane.js'

for (const kind of API_BACKENDS) {
  t.test(`the database holds no plaintext secret (${kind})`, async (t) => {
    const { api, cp } = await startControlPlane(t, kind)
    const o = await api.newTenant()
    const second = await api.post('/v1/keys', { email: o.email }, { bearer: o.apiKey })
    const invite = await api.post('/v1/tenant/invites', undefined, { bearer: o.apiKey })
    const rotated = await api.post('/v1/sponsor/rotate', undefined, { bearer: o.sponsorToken })
    const reenrolled = await api.post('/v1/sponsor/totp', undefined, { bearer: rotated.body.sponsorToken })
    const secrets = [
      o.apiKey,
      o.sponsorToken,
      o.totp.secret,
      ...o.totp.backupCodes,
      ...o.totp.backupCodes.map((c) => c.replace('-', '')),
      second.body.apiKey,
      invite.body.inviteCode,
      rotated.body.sponsorToken,
      reenrolled.body.totp.secret,
      ...reenrolled.body.totp.backupCodes,
    ]
    // A dump-like read: every row of every table, as text.
    const tables = await cp.database!.sql<{ table_name: string }[]>`
      select table_name from information_schema.tables where table_schema = 'public' and table_type = 'BASE TABLE'`
    t.ok(tables.length >= 8)
    let dump = ''
    for (const { table_name } of tables) {
      const rows = await cp.database!.sql.unsafe(`select row_to_json(x)::text as j from "${table_name}" x`)
      dump += rows.map((r) => r.j).join('\n')
    }
    t.ok(dump.length > 1000, 'the dump holds the data')
    for (const s of secrets) {
      t.notOk(dump.includes(s), `secret ${s.slice(0, 6)}… is not stored in plaintext`)
      // Not base64- or hex-encoded either.
      t.notOk(dump.includes(Buffer.from(s).toString('base64')), 'nor base64')
      t.notOk(dump.includes(Buffer.from(s).toString('hex')), 'nor hex')
    }
  })
}
