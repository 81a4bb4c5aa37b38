/**
 * The proxy matches routes on the path it sees, and the upstream acts on the path it
 * normalises. Anything the two could read differently is refused outright rather than
 * normalised: dot segments (raw or percent-encoded), encoded slashes or backslashes,
 * backslashes, empty leading segments and control characters.
 */
export function isSafeUpstreamPath(pathWithQuery: string): boolean {
  const q = pathWithQuery.indexOf('?')
  const path = q === -1 ? pathWithQuery : pathWithQuery.slice(0, q)
  if (!path.startsWith('/') || path.startsWith('//')) return false
  if (pathWithQuery.includes('\\') || pathWithQuery.includes('#') || hasControlCharacter(pathWithQuery))
    return false
  if (/%(2f|5c|00)/i.test(path)) return false
  for (const segment of path.split('/')) {
    const decoded = segment.replace(/%2e/gi, '.')
    if (decoded === '.' || decoded === '..') return false
  }
  return true
}

function hasControlCharacter(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    if (c < 0x20 || c === 0x7f) return true
  }
  return false
}
