import { randomBytes } from 'node:crypto'
import t from 'tap'
import {
  createStepUpVerifier,
  MAX_WRONG_CODES,
  WRONG_CODE_DRAIN_SECONDS,
} from '../../src/actions/step-up-verifier.js'
import type { AuditLog } from '../../src/audit/audit-log.js'
import { ManualClock } from '../../src/core/clock.js'
import type { ReceiptDraft } from '../../src/core/receipt.js'
import { createLogger } from '../../src/observability/logger.js'
import { deriveKeyring, sealSecret } from '../../src/security/keyring.js'
import { newTotpEnrolment, totpCode } from '../../src/security/totp.js'
import { createFakeStorage } from '../fakes/fake-storage.js'

/** A tenant with an authenticator, its verifier on the fake system of record (the SQL is in the contract suite). */
async function setup() {
  const { sor } = createFakeStorage()
  const clock = new ManualClock(Date.UTC(2026, 10, 28))
  const keyring = deriveKeyring(randomBytes(32))
  const recorded: ReceiptDraft[] = []
  const audit = {
    append: async (drafts: readonly ReceiptDraft[]) => {
      recorded.push(...drafts)
      return []
    },
  } as unknown as AuditLog
  const tenantId = 'ten_verifier'
  await sor.stores.tenants.create({ id: tenantId, name: 't', createdAt: 0, sponsorHash: 'h' })
  const enrolSecret = async (replaces: string | null) => {
    const e = newTotpEnrolment('writegate', 't')
    const sealed = sealSecret(keyring, e.secret, `totp:${tenantId}`)
    await sor.stores.totp.enrol(tenantId, sealed, 0, [], replaces)
    return { secret: e.secret, sealed }
  }
  const verifier = createStepUpVerifier({
    stores: sor.stores,
    keyring,
    clock,
    audit,
    logger: createLogger('silent'),
  })
  let enrolled = await enrolSecret(null)
  const seconds = () => Math.floor(clock.nowMs() / 1000)
  /** A right code, a new time step each time (a code works once). */
  const right = async () => {
    clock.advance(30_000)
    return totpCode(enrolled.secret, seconds())
  }
  const use = (code: string) =>
    verifier
      .check(tenantId, code)
      .then((proof) => sor.transaction((tx) => verifier.consume(tx, tenantId, proof)))
  const code = async (p: Promise<unknown>) =>
    p.then(
      () => 'ok',
      (err: { def?: { code: string } }) => err.def?.code,
    )
  return {
    sor,
    clock,
    verifier,
    tenantId,
    recorded,
    right,
    use,
    code,
    reEnrol: async () => {
      enrolled = await enrolSecret(enrolled.sealed)
    },
  }
}

t.test(
  'a right code takes back only its own count: approvals in between do not reset the guesses',
  async (t) => {
    const s = await setup()
    for (let i = 0; i < MAX_WRONG_CODES; i++) {
      t.equal(await s.code(s.use('000000')), 'totp_invalid')
      // A human's approval between every guess changes nothing for the guesser.
      if (i % 10 === 0) t.equal(await s.code(s.use(await s.right())), 'ok', 'a right code is used')
    }
    t.equal(
      await s.code(s.use(await s.right())),
      'step_up_locked',
      'the 101st wrong-or-right code is refused',
    )
    t.equal(s.recorded.length, 1, 'the lock is on record once')
    t.match(s.recorded[0], {
      kind: 'CREDENTIAL_REVOKED',
      detail: { credential: 'totp', reason: 'too_many_wrong_codes' },
    })
    t.equal(await s.code(s.use(await s.right())), 'step_up_locked', 'and stays locked')
    await s.reEnrol()
    t.equal(await s.code(s.use(await s.right())), 'ok', 're-enrolled: unlocked')
  },
)

t.test('wrong codes drain with time, 100 a month, but not once locked', async (t) => {
  const s = await setup()
  for (let i = 0; i < MAX_WRONG_CODES; i++) await s.code(s.use('000000'))
  s.clock.advance((WRONG_CODE_DRAIN_SECONDS / 2) * 1000)
  // Half a month drained 50: 50 more are checked, the 51st overflows.
  for (let i = 0; i < 50; i++) t.equal(await s.code(s.use('000000')), 'totp_invalid')
  t.equal(await s.code(s.use('000000')), 'step_up_locked', 'no burst of another hundred')
  s.clock.advance(WRONG_CODE_DRAIN_SECONDS * 2000)
  t.equal(await s.code(s.use(await s.right())), 'step_up_locked', 'two months later, still locked')
})

t.test('a code checked before the lock engaged does not lift it when used after', async (t) => {
  const s = await setup()
  for (let i = 0; i < MAX_WRONG_CODES - 2; i++) await s.code(s.use('000000'))
  const proof = await s.verifier.check(s.tenantId, await s.right())
  // Guesses land while the approval that checked it is under way.
  t.equal(await s.code(s.use('000000')), 'totp_invalid')
  t.equal(await s.code(s.use('000000')), 'step_up_locked')
  t.equal(
    await s.code(s.sor.transaction((tx) => s.verifier.consume(tx, s.tenantId, proof))),
    'step_up_locked',
    'refused, and nothing is used',
  )
  t.equal(await s.code(s.use(await s.right())), 'step_up_locked', 'still locked')
})

t.test('a code checked before a re-enrolment is not used after it', async (t) => {
  const s = await setup()
  const proof = await s.verifier.check(s.tenantId, await s.right())
  await s.reEnrol()
  t.equal(
    await s.code(s.sor.transaction((tx) => s.verifier.consume(tx, s.tenantId, proof))),
    'totp_invalid',
    "the old authenticator's code no longer counts",
  )
})
