import t from 'tap'
import { REPEAT_EVERY_MS, repeatedFailure } from '../../src/observability/repeated-failure.js'
import { capturingLogger, LOG_LEVEL } from '../helpers/proxy.js'

t.test('a loop failing every second logs once a minute, and once when it recovers', async (t) => {
  const { logger, lines } = capturingLogger()
  let now = 0
  const failures = repeatedFailure(logger, 'receipt drain pass', () => now)
  for (let i = 0; i < 150; i++, now += 1000) failures.failed(new Error('Connection is closed.'))
  const warned = lines.filter((l) => l.level === LOG_LEVEL.warn)
  t.equal(warned.length, 3, `150 failures over 150 s: ${warned.length} lines`)
  t.equal(warned[0]?.msg, 'receipt drain pass failed; will retry')
  t.equal(warned[0]?.failures, 1, 'the first, at once')
  t.equal(warned[1]?.failures, REPEAT_EVERY_MS / 1000, 'then how many it stands for')
  failures.succeeded()
  failures.succeeded()
  t.same(
    lines.filter((l) => l.level === LOG_LEVEL.info).map((l) => l.msg),
    ['receipt drain pass works again'],
    'recovery is said once',
  )
  failures.failed(new Error('again'))
  t.equal(lines.filter((l) => l.level === LOG_LEVEL.warn).length, 4, 'a new outage is logged at once')
})
