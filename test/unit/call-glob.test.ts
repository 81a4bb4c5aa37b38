import t from 'tap'
import { globMatcher } from '../../src/proxy/call-glob.js'

/** The reference: what `*` means, as a regular expression (fine for short names). */
function reference(pattern: string, name: string): boolean {
  const source = pattern
    .split('*')
    .map((p) => p.replace(/[.+?^${}()|[\]\\/]/g, '\\$&'))
    .join('.*')
  return new RegExp(`^${source}$`, 's').test(name)
}

t.test('a glob matches as its regular expression would, on every small case', async (t) => {
  const alphabet = ['a', 'b', '*']
  const words = (n: number, letters: string[]): string[] =>
    n === 0 ? [''] : words(n - 1, letters).flatMap((w) => letters.map((l) => w + l))
  const patterns = [1, 2, 3, 4, 5].flatMap((n) => words(n, alphabet))
  const names = [0, 1, 2, 3, 4, 5, 6].flatMap((n) => words(n, ['a', 'b']))
  let disagreements = 0
  for (const p of patterns) for (const n of names) if (globMatcher(p)(n) !== reference(p, n)) disagreements++
  t.equal(disagreements, 0, `${patterns.length} patterns × ${names.length} names`)
  t.equal(globMatcher('create_*')('create_issue'), true)
  t.equal(globMatcher('*_repository')('delete_repository'), true)
  t.equal(globMatcher('a*a')('a'), false, 'the ends may not overlap')
  t.equal(globMatcher('merge_*')('Merge_x'), false, 'case-sensitive')
})

t.test('a name built to make a regular expression backtrack is judged in one scan', async (t) => {
  // As `^a.*a.*…b$` this backtracks O(n^9) times over a 100,000-character name: the test would time out.
  const pattern = `${'a*'.repeat(9)}b`
  t.equal(globMatcher(pattern)('a'.repeat(100_000)), false)
  t.equal(globMatcher(pattern)(`${'a'.repeat(100_000)}b`), true)
})
