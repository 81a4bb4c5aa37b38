/**
 * HTML built from tagged templates: every interpolated value is escaped unless it is already
 * `Html` (made by this module). Agent-supplied text (bodies, names, targets) can only ever
 * reach a page as text; there is no way to pass a raw string through.
 */
export class Html {
  constructor(readonly value: string) {}
  toString(): string {
    return this.value
  }
}

const ESCAPES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
}

export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ESCAPES[c] as string)
}

type Part = Html | string | number | boolean | null | undefined | readonly Part[]

function render(part: Part): string {
  if (part === null || part === undefined || part === false) return ''
  if (part instanceof Html) return part.value
  if (Array.isArray(part)) return part.map(render).join('')
  return escapeHtml(String(part))
}

export function html(strings: TemplateStringsArray, ...parts: Part[]): Html {
  let out = strings[0] as string
  for (let i = 0; i < parts.length; i++) out += render(parts[i] as Part) + (strings[i + 1] as string)
  return new Html(out)
}

/** A list of fragments as one fragment. */
export function join(parts: readonly Html[]): Html {
  return new Html(parts.map((p) => p.value).join(''))
}
