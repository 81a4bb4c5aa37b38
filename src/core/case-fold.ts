/**
 * A member name as Go's encoding/json matches it to a struct field: regardless of letter case,
 * by simple (one-to-one) case folding, so `ſ` is `S` and `K` (Kelvin) is `K`, but `ß` is not
 * `SS` nor `ﬁ` `FI`. Each character is taken to the upper case of its lower case where that is
 * one character; JavaScript's toLowerCase alone leaves `ſ` as it is. It over-folds a few letters
 * Go keeps apart (`ı` and `I`), which only refuses more.
 */
export function goFold(name: string): string {
  // Most names are ASCII: one call, the same answer.
  if (ASCII.test(name)) return name.toUpperCase()
  let out = ''
  for (const c of name) {
    const folded = c.toLowerCase().toUpperCase()
    out += [...folded].length === 1 ? folded : c
  }
  return out
}

const ASCII = /^\p{ASCII}*$/u
