import { type Html, html } from './html.js'

/**
 * Characters that change how text reads without showing themselves: bidirectional controls
 * (U+202E turns `acct_\u202E9999_eciffo` into "acct_office_9999"), zero-width characters, other
 * format and control characters, line and paragraph separators, every default-ignorable code
 * point (browsers draw them as nothing: `dry\u2065_run` read as "dry_run", found in review), and
 * unassigned ones (a later Unicode may make them any of these).
 */
export const HIDDEN_CLASS =
  // Format, control and separator characters; then blanks that are letters or symbols (Hangul
  // fillers, the braille blank), the combining grapheme joiner and variation selectors.
  '[\\p{Cf}\\p{Cc}\\p{Zl}\\p{Zp}\\p{Default_Ignorable_Code_Point}\\p{Cn}\\u115F\\u1160\\u3164\\uFFA0\\u2800\\u034F\\uFE00-\\uFE0F\\u{E0100}-\\u{E01EF}]'
const HIDDEN = new RegExp(HIDDEN_CLASS, 'u')
const HIDDEN_ALL = new RegExp(HIDDEN_CLASS, 'gu')

/**
 * Agent-supplied text as the approver must see it: escaped, with every hidden character shown
 * as its code point (`U+202E`), marked, so what is approved reads as the bytes that will be
 * sent. `lines` keeps line feeds, carriage returns and tabs as they are (a text body in <pre>).
 */
export function visible(text: string, opts: { lines?: boolean } = {}): Html {
  if (!HIDDEN.test(text)) return html`${text}`
  const parts: (string | Html)[] = []
  let at = 0
  for (const m of text.matchAll(HIDDEN_ALL)) {
    const c = m[0]
    if (opts.lines && (c === '\n' || c === '\r' || c === '\t')) continue
    const i = m.index as number
    parts.push(text.slice(at, i))
    const code = `U+${(c.codePointAt(0) as number).toString(16).toUpperCase().padStart(4, '0')}`
    parts.push(html`<span class="hidden-char" title="a hidden character">${code}</span>`)
    at = i + c.length
  }
  parts.push(text.slice(at))
  return html`${parts}`
}
