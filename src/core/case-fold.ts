/**
 * A member name as Go's encoding/json matches it to a struct field: regardless of letter case,
 * by simple (one-to-one) case folding, so `ſ` is `S`, `K` (Kelvin) is `K` and `ẞ` is `ß`, but
 * `ß` is not `SS` nor `ﬁ` `FI`. Each character is taken to the upper case of its lower case
 * where that is one character, else to its lower case where that is; JavaScript's toLowerCase
 * alone leaves `ſ` as it is. It over-folds a few letters
 * Go keeps apart (`ı` and `I`), which only refuses more.
 */
export function goFold(name: string): string {
  // Most names are ASCII: one call, the same answer.
  if (ASCII.test(name)) return name.toUpperCase()
  let out = ''
  for (const c of name) {
    const lower = c.toLowerCase()
    const folded = lower.toUpperCase()
    out += oneCharacter(folded) ? folded : oneCharacter(lower) ? lower : c
  }
  return out
}

const ASCII = /^\p{ASCII}*$/u
const oneCharacter = (s: string) => s.length === 1 || (s.length === 2 && s.codePointAt(0) !== s.charCodeAt(0))
