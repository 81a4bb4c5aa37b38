import { goFold } from '../core/case-fold.js'

/**
 * A key of `obj` that differs from one of `members` only by letter case, if any. Some JSON
 * decoders match member names regardless of case and keep the last match (Go's encoding/json):
 * `{"method":"tools/list","METHOD":"tools/call"}` is a list to the gate and a call to such a
 * server. A body holding one is refused rather than guessed at.
 */
export function caseVariantOf(obj: Record<string, unknown>, members: ReadonlySet<string>): string | null {
  for (const key of Object.keys(obj)) {
    if (members.has(key)) continue
    const folded = goFold(key)
    for (const m of members) if (goFold(m) === folded) return key
  }
  return null
}
