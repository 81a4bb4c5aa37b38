/**
 * The shell commands a Markdown page prints: its fenced blocks, their command lines, and each
 * line's words and simple commands, enough to run or check them as printed.
 */

export interface Block {
  lang: string
  text: string
}

export function blocks(markdown: string): Block[] {
  return [...markdown.matchAll(/^```(\w*)\n([\s\S]*?)^```$/gm)].map((m) => ({
    lang: m[1] ?? '',
    text: m[2] ?? '',
  }))
}

/** Shell blocks, as a reader would paste them. */
export function isShell(block: Block): boolean {
  return ['sh', 'bash', 'shell'].includes(block.lang)
}

/**
 * A block's command lines: continuations joined, a quote that spans lines (a JSON body) kept in
 * its line, blank lines and comment lines dropped.
 */
export function commands(block: Block): string[] {
  const out: string[] = []
  let pending: string | null = null
  for (const raw of block.text.replace(/\\\n\s*/g, ' ').split('\n')) {
    const line: string = pending === null ? raw.trim() : `${pending}\n${raw}`
    if (openQuote(line)) {
      pending = line
      continue
    }
    pending = null
    if (line !== '' && !line.startsWith('#')) out.push(line)
  }
  if (pending !== null) throw new Error(`unbalanced quote in: ${pending}`)
  return out
}

/** Whether a line ends inside a quote (as `words` reads quotes). */
function openQuote(line: string): boolean {
  let quote: string | null = null
  for (let i = 0; i < line.length; i++) {
    const c = line[i] as string
    if (quote) {
      if (c === quote) quote = null
      else if (c === '\\' && quote === '"') i++
    } else if (c === "'" || c === '"') quote = c
    else if (c === '#' && (i === 0 || /\s/.test(line[i - 1] as string))) return false
  }
  return quote !== null
}

/** Shell words, with quotes removed; `$VARS` are kept as written. */
export function words(line: string): string[] {
  const out: string[] = []
  let cur = ''
  let quote: string | null = null
  let started = false
  for (let i = 0; i < line.length; i++) {
    const c = line[i] as string
    if (quote) {
      if (c === quote) quote = null
      else if (c === '\\' && quote === '"' && i + 1 < line.length) cur += line[++i]
      else cur += c
    } else if (c === "'" || c === '"') {
      quote = c
      started = true
    } else if (/\s/.test(c)) {
      if (started) out.push(cur)
      cur = ''
      started = false
    } else {
      cur += c
      started = true
    }
  }
  if (quote) throw new Error(`unbalanced quote in: ${line}`)
  if (started) out.push(cur)
  return out
}

/** One simple command of a line, as printed, and the operator that joins it to the one before. */
export interface Segment {
  raw: string
  words: string[]
  /** `VAR=value` words before the command. */
  assignments: Record<string, string>
  /** The command and its arguments. */
  argv: string[]
  /** How it is joined to the previous segment: `|` means it reads that one's output. */
  joinedBy: '&&' | '||' | ';' | '|' | null
}

/**
 * Splits a command line at the operators outside quotes and `$( )` (`&&`, `||`, `;`, `|`),
 * dropping a trailing `# comment`.
 */
export function segments(line: string): Segment[] {
  const parts: { raw: string; joinedBy: Segment['joinedBy'] }[] = []
  let cur = ''
  let quote: string | null = null
  let depth = 0
  let joinedBy: Segment['joinedBy'] = null
  const push = (op: Segment['joinedBy']) => {
    parts.push({ raw: cur.trim(), joinedBy })
    joinedBy = op
    cur = ''
  }
  for (let i = 0; i < line.length; i++) {
    const c = line[i] as string
    const next = line[i + 1]
    if (quote) {
      if (c === quote) quote = null
      cur += c
      continue
    }
    if (c === "'" || c === '"') quote = c
    else if (c === '$' && next === '(') depth++
    else if (c === ')' && depth > 0) depth--
    else if (depth === 0) {
      if (c === '#' && (cur === '' || /\s$/.test(cur))) break
      if ((c === '&' || c === '|') && next === c) {
        push(c === '&' ? '&&' : '||')
        i++
        continue
      }
      if (c === '|' || c === ';') {
        push(c)
        continue
      }
    }
    cur += c
  }
  push(null)
  return parts
    .filter((p) => p.raw !== '')
    .map((p) => {
      const w = words(p.raw)
      const assignments: Record<string, string> = {}
      let i = 0
      for (; i < w.length && /^[A-Za-z_][A-Za-z0-9_]*=/.test(w[i] as string); i++) {
        const a = w[i] as string
        assignments[a.slice(0, a.indexOf('='))] = a.slice(a.indexOf('=') + 1)
      }
      return { raw: p.raw, words: w, assignments, argv: w.slice(i), joinedBy: p.joinedBy }
    })
}
