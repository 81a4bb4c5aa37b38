/**
 * A member name as Go's encoding/json matches it to a struct field: regardless of letter case,
 * with `ſ` as `S` and `K` (Kelvin) as `K` (upper of lower; JavaScript's toLowerCase alone leaves
 * `ſ` as it is). It over-folds a few letters Go keeps apart (`ı`), which only refuses more.
 */
export const goFold = (name: string): string => name.toLowerCase().toUpperCase()
