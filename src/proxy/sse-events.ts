/**
 * Splits a text/event-stream into its events, as the bytes came: each event is its raw lines,
 * terminators included, and the blank line that ends it. A rewriting proxy must pass every
 * event it does not change byte for byte (an id-only event included, which a client's
 * resumption reads and parsers made for clients, eventsource-parser among them, do not hand
 * out), so this splits and leaves parsing to the caller. Lines end with CRLF, LF or CR (the
 * SSE grammar); a CR at the end of a chunk waits for the next, which may hold its LF.
 */
export interface SseSplitter {
  feed(chunk: string): void
  /** The stream ended: what is left (an event never ended by a blank line, which clients discard). */
  rest(): string
  /** Characters held for an event not yet ended. */
  readonly held: number
}

const EOL = /\r\n|\r|\n/g

export function createSseSplitter(onEvent: (lines: readonly string[], raw: string) => void): SseSplitter {
  let pending = ''
  let lines: string[] = []
  let linesLength = 0
  return {
    feed(chunk) {
      pending += chunk
      let start = 0
      EOL.lastIndex = 0
      for (let m = EOL.exec(pending); m !== null; m = EOL.exec(pending)) {
        if (m[0] === '\r' && m.index === pending.length - 1) break
        const end = m.index + m[0].length
        const raw = pending.slice(start, end)
        const blank = m.index === start
        start = end
        if (!blank) {
          lines.push(raw)
          linesLength += raw.length
          continue
        }
        const event = lines
        lines = []
        linesLength = 0
        onEvent(event, event.join('') + raw)
      }
      pending = pending.slice(start)
    },
    rest() {
      const left = lines.join('') + pending
      lines = []
      linesLength = 0
      pending = ''
      return left
    },
    get held() {
      return linesLength + pending.length
    },
  }
}

/** An event's data (its `data` lines joined by LF, as a client sees it); null when it has none. */
export function eventData(lines: readonly string[]): string | null {
  let data: string[] | null = null
  for (const line of lines) {
    const content = line.replace(/\r\n$|\r$|\n$/, '')
    if (content !== 'data' && !content.startsWith('data:')) continue
    let value = content === 'data' ? '' : content.slice(5)
    if (value.startsWith(' ')) value = value.slice(1)
    if (data === null) data = []
    data.push(value)
  }
  return data === null ? null : data.join('\n')
}

/** The event with its data replaced by `data` (one line: JSON has no raw newlines), its other fields kept in place. */
export function withData(lines: readonly string[], data: string): string {
  let out = ''
  let written = false
  for (const line of lines) {
    const content = line.replace(/\r\n$|\r$|\n$/, '')
    if (content === 'data' || content.startsWith('data:')) {
      if (!written) out += `data: ${data}\n`
      written = true
    } else out += line
  }
  return `${out}\n`
}
