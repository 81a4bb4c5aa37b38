import { literal } from '../core/path-pattern.js'

/**
 * Whether one route pattern matches every path another matches, so that the other, listed
 * after it, could never decide (the first route that matches decides: path-pattern.ts). Sure
 * answers only: `true` when coverage is certain, `false` when it is not or cannot be told. An
 * admin who adds `POST /v1/refunds/{id} → refund` after `POST /v1/refunds/* → verify` would
 * otherwise get no error and no refund gating (found in review).
 */

/** One segment: literal text (lower case: patterns compare case-insensitively), or a placeholder between affixes. */
type Segment = { literal: string } | { prefix: string; suffix: string }

interface Shape {
  segments: Segment[]
  /** A trailing `*`: the segments and anything below them. */
  below: boolean
}

const PLACEHOLDER = /\{[A-Za-z_][A-Za-z0-9_]*\}/

function shapeOf(pattern: string): Shape {
  const below = pattern.endsWith('*')
  let body = below ? pattern.slice(0, -1) : pattern
  if (body.endsWith('/')) body = body.slice(0, -1)
  const segments = body
    .split('/')
    .slice(1)
    .map((text): Segment => {
      // Escapes decoded, as routes match (path-pattern.ts).
      const m = PLACEHOLDER.exec(text)
      if (!m) return { literal: literal(text).toLowerCase() }
      return {
        prefix: literal(text.slice(0, m.index)).toLowerCase(),
        suffix: literal(text.slice(m.index + m[0].length)).toLowerCase(),
      }
    })
  return { segments, below }
}

/** Whether every segment `b` matches, `a` matches too. */
function segmentCovers(a: Segment, b: Segment): boolean {
  if ('literal' in a) return 'literal' in b && a.literal === b.literal
  if ('literal' in b)
    return (
      b.literal.length > a.prefix.length + a.suffix.length &&
      b.literal.startsWith(a.prefix) &&
      b.literal.endsWith(a.suffix)
    )
  return b.prefix.startsWith(a.prefix) && b.suffix.endsWith(a.suffix)
}

/** Whether every path `later` matches, `earlier` matches too (same method assumed). */
export function routeCovers(earlier: string, later: string): boolean {
  const a = shapeOf(earlier)
  const b = shapeOf(later)
  if (a.below) {
    if (b.segments.length < a.segments.length) return false
  } else if (b.below || b.segments.length !== a.segments.length) return false
  return a.segments.every((s, i) => segmentCovers(s, b.segments[i] as Segment))
}
