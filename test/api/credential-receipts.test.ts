import t from 'tap'
import { API_BACKENDS } from '../helpers/backends.js'
import { startControlPlane } from '../helpers/control-plane.js'

for (const kind of API_BACKENDS) {
  t.test(`credential changes are on record, without their secrets (${kind})`, async (t) => {
    const { api, cp } = await startControlPlane(t, kind)
    const o = await api.newTenant()
    const invite = await api.post('/v1/tenant/invites', undefined, { bearer: o.apiKey })
    const rotated = await api.post('/v1/sponsor/rotate', undefined, { bearer: o.sponsorToken })
    const totp = await api.post('/v1/sponsor/totp', undefined, { bearer: rotated.body.sponsorToken })
    const badge = await api.post('/v1/badge/tokens', { label: 'docs' }, { bearer: o.apiKey })
    t.equal((await api.delete(`/v1/badge/tokens/${badge.body.badgeToken}`, { bearer: o.apiKey })).status, 204)
    const rows = await cp.database!.sql<{ kind: string; body: string }[]>`
      select kind, body from receipts where tenant_id = ${o.tenantId} and kind like 'CREDENTIAL_%' order by seq`
    t.same(
      rows.map((r) => [r.kind, JSON.parse(r.body).detail.credential]),
      [
        ['CREDENTIAL_ISSUED', 'invite_code'],
        ['CREDENTIAL_ISSUED', 'sponsor_token'],
        ['CREDENTIAL_ISSUED', 'totp'],
        ['CREDENTIAL_ISSUED', 'badge_token'],
        ['CREDENTIAL_REVOKED', 'badge_token'],
      ],
    )
    t.match(JSON.parse(rows[0]!.body), {
      keyId: o.keyId,
      detail: { actor: { type: 'key', keyId: o.keyId }, expiresAt: invite.body.expiresAt },
    })
    t.match(JSON.parse(rows[1]!.body), { detail: { actor: { type: 'sponsor' } } })
    const all = rows.map((r) => r.body).join('\n')
    for (const secret of [
      invite.body.inviteCode,
      rotated.body.sponsorToken,
      totp.body.totp.secret,
      ...totp.body.totp.backupCodes,
      badge.body.badgeToken,
      'docs',
    ]) {
      t.notOk(all.includes(secret), 'no secret (and not the private badge label) in the receipts')
    }
    const verify = await api.get('/v1/receipts/verify', { bearer: o.apiKey })
    t.equal(verify.body.valid, true, 'and the chain still verifies')
  })
}
