/** One changed top-level parameter of a staged action. */
export interface ParamChange {
  key: string
  change: 'added' | 'removed' | 'changed'
  before?: unknown
  after?: unknown
}

const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b)

/** What an approval's params edits change, key by key (edits merge over the staged params). */
export function paramsDiff(staged: Record<string, unknown>, edits: Record<string, unknown>): ParamChange[] {
  const out: ParamChange[] = []
  for (const [key, after] of Object.entries(edits)) {
    if (!Object.hasOwn(staged, key)) out.push({ key, change: 'added', after })
    else if (!same(staged[key], after)) out.push({ key, change: 'changed', before: staged[key], after })
  }
  return out
}
