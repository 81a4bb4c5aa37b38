const compiled = new Map<string, (name: string) => boolean>()
const KEPT = 1024

/**
 * A tool or field name pattern of a body-aware route: exact, or with `*` standing for any run
 * of characters (`create_*`, `*_repository`). Case-sensitive: tool and field names are.
 *
 * Matched without a regular expression: `^a.*b.*c$` backtracks polynomially in the name's
 * length (a name is the agent's, up to the body limit), while each piece found leftmost here is
 * never revisited, so a match costs at most one scan per piece.
 */
export function globMatcher(pattern: string): (name: string) => boolean {
  let m = compiled.get(pattern)
  if (m) return m
  if (!pattern.includes('*')) m = (name) => name === pattern
  else {
    const pieces = pattern.split('*')
    const first = pieces[0] as string
    const last = pieces[pieces.length - 1] as string
    const middle = pieces.slice(1, -1).filter((p) => p !== '')
    const fixed = first.length + last.length
    m = (name) => {
      if (name.length < fixed || !name.startsWith(first) || !name.endsWith(last)) return false
      // Leftmost is safe for the pieces between stars: an earlier match leaves more room after it.
      let at = first.length
      const end = name.length - last.length
      for (const p of middle) {
        const found = name.indexOf(p, at)
        if (found < 0 || found + p.length > end) return false
        at = found + p.length
      }
      return true
    }
  }
  if (compiled.size >= KEPT) compiled.delete(compiled.keys().next().value as string)
  compiled.set(pattern, m)
  return m
}
