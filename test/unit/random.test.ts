import t from 'tap'
import { isBase62, randomBase62 } from '../../src/core/random.js'

t.test('random base62: right length and alphabet, no repeats, roughly uniform', async (t) => {
  const seen = new Set<string>()
  const counts = new Map<string, number>()
  for (let i = 0; i < 20000; i++) {
    const s = randomBase62(22)
    if (s.length !== 22 || !isBase62(s)) t.fail(`bad id ${s}`)
    seen.add(s)
    for (const c of s) counts.set(c, (counts.get(c) ?? 0) + 1)
  }
  t.equal(seen.size, 20000, 'no collisions across pool refills')
  t.equal(counts.size, 62, 'every symbol occurs')
  const expected = (20000 * 22) / 62
  for (const [c, n] of counts)
    if (Math.abs(n - expected) > expected * 0.1) t.fail(`symbol ${c} is skewed: ${n} vs ${expected}`)
})
