import t from 'tap'
import { goFold } from '../../src/core/case-fold.js'

/**
 * Pairs Go's encoding/json matches to one struct field, and pairs it keeps apart: from Go's
 * unicode.SimpleFold orbits, which its decoder's foldName follows. Written out, not derived, so a
 * mistake in the folding shows here.
 */
const SAME: [string, string][] = [
  ['accountId', 'ACCOUNTID'],
  ['k', '\u212a'], // Kelvin sign
  ['s', '\u017f'], // long s
  ['\u00df', '\u1e9e'], // ß and capital sharp s
  ['\u00b5', '\u03bc'], // micro sign and mu
  ['\u03c3', '\u03c2'], // sigma and final sigma
  ['\u00e9t\u00e9', '\u00c9T\u00c9'],
]
const APART: [string, string][] = [
  ['\u00df', 'ss'], // no fold of one letter into two
  ['\ufb01', 'fi'],
  ['\u0130', 'i'], // dotted capital I
  ['a', 'b'],
]

t.test("Go's simple case folding, pair by pair", async (t) => {
  for (const [a, b] of SAME) t.equal(goFold(a), goFold(b), `${a} and ${b}: one field`)
  for (const [a, b] of APART) t.not(goFold(a), goFold(b), `${a} and ${b}: two fields`)
  // Go keeps dotless i apart from I; this folds them together, which only refuses more.
  t.equal(goFold('\u0131'), goFold('I'), 'dotless i: over-folded, documented')
})
