/**
 * Route path patterns: literal segments, `{name}` placeholders (one segment each) and an
 * optional trailing `*` (the rest, at a segment boundary). Matched against the path
 * percent-decoded, as Werkzeug, Go's net/http and fastify's router read it before they route
 * (the raw path was first refused if an upstream could read it as another path: safe-path.ts).
 * Matched raw, `/v1/users/%40me` escaped a route `/v1/users/@me` that the upstream ran (found in
 * review).
 *
 * Upstreams differ in how they compare paths, so a pattern matches the way the most lenient
 * of them would: letters in any case (Unicode's too), and with or without one trailing slash. A
 * route that matches more requests gates more of them; a route that matched less would let a
 * read reach a case-insensitive upstream ungated.
 */
export interface PathPattern {
  readonly source: string
  match(path: string): Record<string, string> | null
  /** The same, for a path's spellings made once (a route table tries many patterns on one path). */
  matchSpellings(spellings: PathSpellings): Record<string, string> | null
}

function escapeRegex(s: string): string {
  return s.replace(/[.*+?^$()|[\]\\{}]/g, '\\$&')
}

/**
 * The path as an upstream that percent-decodes it reads it, or null when an escape is not UTF-8
 * or a `%` starts none (safe-path.ts refuses such a path before any match).
 */
export function decodedPath(path: string): string | null {
  if (!path.includes('%')) return path
  try {
    return decodeURIComponent(path)
  } catch {
    return null
  }
}

/**
 * One spelling of a decoded path: each of its UTF-16 units came from one character of the path
 * (a base and its combining marks), whose start and end in the decoded path `from` and `upto` give.
 */
interface Spelling {
  text: string
  from: number[]
  upto: number[]
}

/** The spellings of a request's path a lenient upstream may route it as (made once per request). */
export interface PathSpellings {
  decoded: string
  /** False for a path of ASCII alone, which the case-insensitive match covers as it is. */
  pastAscii: boolean
  /** The spellings other than the decoded path, made when first asked for (the decoded path is tried first). */
  others(): Spelling[]
}

const PAST_ASCII = /[\u0080-\uffff]/
const MARK = /^\p{M}$/u

/** A code point's first code point: its simple case mapping where the full one is longer (İ → i̇ → i). */
const firstCodePoint = (s: string): string => String.fromCodePoint(s.codePointAt(0) as number)
const eachFirst = (s: string, map: (c: string) => string): string =>
  Array.from(s, (c) => firstCodePoint(map(c))).join('')

/**
 * Applied one character at a time (a base and its marks: NFKC composes `u` and U+0308 into `ü`),
 * so each unit of a spelling is known to come from one character of the path: captures are cut
 * from the path as sent, never from a spelling (a grant for `ACCT-1` is not `acct-1`'s).
 */
const SPELLERS: ((c: string) => string)[] = [
  // NFKC: IIS maps fullwidth letters to ASCII ones (`ｋ` is `k`).
  (c) => c.normalize('NFKC'),
  // Lower-cased, the simple mapping: Java and Spring read `İ` as `i`; fastify lower-cases
  // U+212A KELVIN SIGN to `k`.
  (c) => eachFirst(c, (x) => x.toLowerCase()),
  // Upper-cased: .NET reads `ı` as `I`.
  (c) => c.toUpperCase(),
  (c) => eachFirst(c.normalize('NFKC'), (x) => x.toLowerCase()),
  (c) => c.normalize('NFKC').toUpperCase(),
]

/** The path's characters: each a base code point and the combining marks after it. */
function charactersOf(decoded: string): [number, number][] {
  const out: [number, number][] = []
  let i = 0
  while (i < decoded.length) {
    const start = i
    i += (decoded.codePointAt(i) as number) > 0xffff ? 2 : 1
    while (i < decoded.length) {
      const cp = decoded.codePointAt(i) as number
      if (cp < 0x300 || !MARK.test(String.fromCodePoint(cp))) break
      i += cp > 0xffff ? 2 : 1
    }
    out.push([start, i])
  }
  return out
}

function spelled(decoded: string, characters: [number, number][], speller: (c: string) => string): Spelling {
  let text = ''
  const from: number[] = []
  const upto: number[] = []
  for (const [start, end] of characters) {
    const c = decoded.slice(start, end)
    // An ASCII character alone spells as itself: the match ignores ASCII case anyway.
    const t = end - start === 1 && decoded.charCodeAt(start) < 0x80 ? c : speller(c)
    text += t
    for (let k = 0; k < t.length; k++) {
      from.push(start)
      upto.push(end)
    }
  }
  return { text, from, upto }
}

/**
 * A path's spellings: decoded, and past ASCII, also NFKC and case-mapped character by
 * character, each matched under Unicode case folding besides (`ſ` is `s`).
 */
export function pathSpellings(path: string): PathSpellings {
  const decoded = decodedPath(path) ?? path
  const pastAscii = PAST_ASCII.test(decoded)
  let others: Spelling[] | null = null
  return {
    decoded,
    pastAscii,
    others() {
      if (others !== null) return others
      others = []
      if (!pastAscii) return others
      const characters = charactersOf(decoded)
      const seen = new Set([decoded])
      for (const speller of SPELLERS) {
        const form = spelled(decoded, characters, speller)
        if (seen.has(form.text)) continue
        seen.add(form.text)
        others.push(form)
      }
      return others
    },
  }
}

/**
 * `path` without its trailing dots and spaces (raw or encoded), which IIS drops. A loop from the
 * end, not `/(?:\.|%20)+$/`: that expression retries from every dot of a long run and is quadratic.
 */
function withoutTrailingDots(path: string): string {
  let end = path.length
  for (;;) {
    if (path[end - 1] === '.' || path[end - 1] === ' ') end -= 1
    else if (end >= 3 && path[end - 3] === '%' && path[end - 2] === '2' && path[end - 1] === '0') end -= 3
    else return path.slice(0, end)
  }
}

/**
 * `path` without one format suffix (`.json`), which Rails routes to the path without it. Any
 * characters but `.` and `/` after the last dot, as Rails's `:format` takes them: `.x-y` too
 * (found in review: only letters and digits were dropped, and `/v1/refunds.x-y` escaped its route).
 */
function withoutFormatSuffix(path: string): string {
  let start = path.length
  while (start > 0 && path[start - 1] !== '.' && path[start - 1] !== '/') start -= 1
  return start < path.length && path[start - 1] === '.' ? path.slice(0, start - 1) : path
}

/** `path` cut before its slash number `n + 1` (its first `n` segments), or whole. */
function firstSegments(path: string, n: number): string {
  let at = 0
  for (let i = 0; i < n; i++) {
    at = path.indexOf('/', at + 1)
    if (at < 0) return path
  }
  return path.slice(0, at)
}

export function compilePathPattern(source: string): PathPattern {
  const names: string[] = []
  let re = '^'
  const wildcard = source.endsWith('*')
  let body = wildcard ? source.slice(0, -1) : source
  // `/a/` and `/a`, `/a/*` and `/a*` are one route each.
  if (body.endsWith('/')) body = body.slice(0, -1)
  // Placeholders found in the route as written, then its literal text's escapes read as a
  // request's are (`/v1/a%40b` is `/v1/a@b`; `%7Bx%7D` stays a literal, not a placeholder).
  const parts = body
    .split(/(\{[A-Za-z_][A-Za-z0-9_]*\})/)
    .map((part, i) => (i % 2 === 1 ? part : literal(part)))
  // `/v1/x.` is `/v1/x` with a trailing dot, which the path may or may not keep (below).
  const last = parts.length - 1
  parts[last] = withoutTrailingDots(parts[last] as string)
  let slashes = 0
  parts.forEach((part, i) => {
    if (i % 2 === 1) {
      names.push(part.slice(1, -1))
      re += '([^/]+)'
    } else {
      re += escapeRegex(part)
      // Placeholders never span a `/`, so the route's segments end at a fixed count of them.
      slashes += part.split('/').length - 1
    }
  })
  const regex = new RegExp(`${re}$`, 'i')
  // For a path past ASCII: `i` alone folds ASCII letters only; `d` for where captures are.
  let unicodeRegex: RegExp | null = null

  const exec = (path: string, regex: RegExp): RegExpExecArray | null => {
    let p = path
    // `/v1/stream*` is `/v1/stream` and anything below it, not `/v1/streamXYZ`.
    if (wildcard) p = firstSegments(p, slashes)
    else if (p.endsWith('/')) p = p.slice(0, -1)
    // A route is also its path with a format suffix (Rails routes `/v1/refunds.json` to
    // `/v1/refunds`) and with trailing dots or spaces (IIS drops them): otherwise such a path
    // would escape the route to a broader one, or to none. Tried as at most four exact matches,
    // not one expression with optional tails: after a trailing `{placeholder}` the two can
    // divide the same dots in every way, and an agent's long path of them backtracked for
    // seconds (found in review).
    const m = regex.exec(p)
    if (m) return m
    const undotted = withoutTrailingDots(p)
    if (undotted !== p) {
      const u = regex.exec(undotted)
      if (u) return u
    }
    const bare = withoutFormatSuffix(undotted)
    if (bare === undotted) return null
    const b = regex.exec(bare)
    if (b) return b
    // A route's own trailing dots are dropped (above), so the path's before the suffix go too:
    // `/v1/x.` is `/v1/x..json`.
    const bareUndotted = withoutTrailingDots(bare)
    return bareUndotted !== bare ? regex.exec(bareUndotted) : null
  }

  /** A match's captures as they stand (in the decoded path). */
  const captured = (m: RegExpExecArray): Record<string, string> => {
    const params: Record<string, string> = {}
    names.forEach((n, i) => {
      params[n] = m[i + 1] as string
    })
    return params
  }

  const matchSpellings = (sp: PathSpellings): Record<string, string> | null => {
    // A path with no escape and no character past ASCII (nearly every one) pays for neither.
    if (!sp.pastAscii) {
      const m = exec(sp.decoded, regex)
      return m ? captured(m) : null
    }
    unicodeRegex ??= new RegExp(`${re}$`, 'iud')
    const m = exec(sp.decoded, unicodeRegex)
    if (m) return captured(m)
    for (const form of sp.others()) {
      const f = exec(form.text, unicodeRegex)
      if (!f) continue
      // Cut from the decoded path: whole characters, from the first whose spelling the capture
      // holds a unit of to the last (ß spelled SS and split by the route is kept whole).
      const params: Record<string, string> = {}
      names.forEach((n, i) => {
        // The `d` flag: every match has its indices.
        const [start, end] = (f.indices as RegExpIndicesArray)[i + 1] as [number, number]
        params[n] = sp.decoded.slice(form.from[start], form.upto[end - 1])
      })
      return params
    }
    return null
  }

  return {
    source,
    match: (path) => matchSpellings(pathSpellings(path)),
    matchSpellings,
  }
}

/**
 * A route's literal text with its escapes decoded, but for an encoded slash, backslash or `%`,
 * which a request may not hold (safe-path.ts): decoded, they would match what those do not mean.
 * Enrolment compares routes by it too (`/v1/%40me` is `/v1/@me`).
 */
export function literal(part: string): string {
  if (!part.includes('%') || /%(2f|5c|25)/i.test(part)) return part
  return decodedPath(part) ?? part
}

/** Fills `{name}` placeholders of a target template; unknown names stay as written. */
export function fillTemplate(template: string, params: Readonly<Record<string, string>>): string {
  return template.replace(/\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (whole, name: string) => params[name] ?? whole)
}
