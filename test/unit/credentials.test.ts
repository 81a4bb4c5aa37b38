import t from 'tap'
import {
  classifyCredential,
  newApiKey,
  newBadgeToken,
  newInviteCode,
  newSponsorToken,
} from '../../src/core/credentials.js'
import { isValidPrincipalName, normalizeEmail } from '../../src/core/names.js'
import { maskSecrets } from '../../src/observability/logger.js'

t.test('credential formats never collide', async (t) => {
  for (let i = 0; i < 200; i++) {
    t.equal(classifyCredential(newApiKey()), 'apiKey')
    t.equal(classifyCredential(newSponsorToken()), 'sponsor')
    t.equal(classifyCredential(newBadgeToken()), 'badge')
    t.equal(classifyCredential(newInviteCode()), null, 'an invite code is no credential')
  }
  for (const bad of [
    '',
    'svc_',
    'svc_abc',
    `svc_${'a'.repeat(31)}`,
    `svc_${'a'.repeat(40)}!`,
    `svc_sp_${'a'.repeat(20)}`,
    `Bearer svc_${'a'.repeat(40)}`,
    `svc_${'a'.repeat(300)}`,
  ]) {
    t.equal(classifyCredential(bad), null, JSON.stringify(bad.slice(0, 20)))
  }
})

t.test('principal names and emails', async (t) => {
  t.ok(isValidPrincipalName('a'))
  t.ok(isValidPrincipalName('Billing Bot v2.1_x-y'))
  t.notOk(isValidPrincipalName('___'))
  t.notOk(isValidPrincipalName('x'.repeat(65)))
  t.equal(normalizeEmail(' Ada@Example.COM '), 'ada@example.com')
  for (const bad of ['a', 'a@b', '@x.com', 'a@@x.com', 'a b@x.com', `${'a'.repeat(250)}@x.com`, 'a@-.'])
    t.equal(normalizeEmail(bad), null, bad)
})

t.test('logs never carry a secret: URLs and messages are masked', async (t) => {
  const key = newApiKey()
  const badge = newBadgeToken()
  t.equal(maskSecrets(`/v1/badge/${badge}.svg`), '/v1/badge/svc_badge_***.svg')
  t.notOk(
    maskSecrets(`failed for ${key} and ${newSponsorToken()} and ${newInviteCode()}`).match(/[A-Za-z0-9]{32}/),
  )
})
