const compiled = new Map<string, (name: string) => boolean>()
const KEPT = 1024

/**
 * A tool or field name pattern of a body-aware route: exact, or with `*` standing for any run
 * of characters (`create_*`, `*_repository`). Case-sensitive: tool and field names are.
 */
export function globMatcher(pattern: string): (name: string) => boolean {
  let m = compiled.get(pattern)
  if (m) return m
  if (!pattern.includes('*')) m = (name) => name === pattern
  else {
    const re = new RegExp(
      `^${pattern
        .split('*')
        .map((p) => p.replace(/[.+?^${}()|[\]\\/]/g, '\\$&'))
        .join('.*')}$`,
    )
    m = (name) => re.test(name)
  }
  if (compiled.size >= KEPT) compiled.delete(compiled.keys().next().value as string)
  compiled.set(pattern, m)
  return m
}
