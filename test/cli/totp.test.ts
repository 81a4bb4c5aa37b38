import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { matchTotpStep, newTotpEnrolment } from '../../src/security/totp.js'
import { runCli } from '../helpers/cli.js'

t.test('writegate totp prints a code the server accepts, from a file, stdin or --secret', async (t) => {
  // An enrolment as POST /v1/keys makes it for a new tenant.
  const { secret } = newTotpEnrolment('writegate', 'you@example.com')
  const file = join(mkdtempSync(join(tmpdir(), 'wg-totp-')), 'totp.secret')
  writeFileSync(file, `${secret}\n`)
  // As an authenticator app shows it: lower case, in groups of four.
  const grouped = secret.toLowerCase().replace(/(.{4})/g, '$1 ')
  const runs = await Promise.all([
    runCli(['totp', '--secret-file', file]),
    runCli(['totp'], { input: `${secret}\n` }),
  ])
  runs.push(await runCli(['totp', '--secret', grouped]))
  for (const r of runs) {
    t.equal(r.code, 0, r.stderr)
    t.match(r.stdout, /^\d{6}$/)
    t.not(
      await matchTotpStep(secret, r.stdout, Math.floor(Date.now() / 1000)),
      null,
      "the server's verifier accepts it",
    )
    t.notMatch(r.stdout + r.stderr, secret, 'the secret is never printed')
  }
})

t.test('writegate totp: a bad or missing secret is one line that does not repeat it', async (t) => {
  const notSecret = 'correct-horse-battery-staple'
  const [bad, none, missing] = await Promise.all([
    runCli(['totp'], { input: `${notSecret}\n` }),
    runCli(['totp'], { input: '' }),
    runCli(['totp', '--secret-file', '/nonexistent/totp.secret']),
  ])
  t.equal(bad.code, 1)
  t.equal(
    bad.stderr,
    'writegate: not a TOTP secret: expected the base32 totp.secret of POST /v1/keys (letters A-Z and digits 2-7)',
  )
  t.equal(none.code, 1)
  t.equal(none.stderr, 'writegate: no TOTP secret given (see: writegate totp --help)')
  t.equal(missing.code, 1)
  t.equal(missing.stderr, 'writegate: cannot read /nonexistent/totp.secret (ENOENT)')
  for (const r of [bad, none, missing]) t.equal(r.stdout, '')
})
