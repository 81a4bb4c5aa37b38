/**
 * An upstream's answer that carries back the credential writegate injected: an endpoint that
 * echoes the request's headers, an error page that quotes the token it was sent. The agent
 * must never hold that credential, so such an answer is not relayed.
 *
 * What is looked for: the secret as sent (its UTF-8 and, for a secret beyond ASCII, its
 * Latin-1 bytes, which is how Node sends a header), percent-encoded (a redirect's query, a
 * form: upper- or lower-case hex, `/` encoded or left as it is, `!'()*~` encoded or not) and
 * with `/` escaped as JSON may write it; in a header's name, in lower case too (Node's own
 * spelling of names). Not what an upstream could make of it otherwise (base64, a `Range` of the
 * echo, another case): this catches an upstream that echoes by accident, not one working with
 * the agent.
 */

/** Secrets shorter than this are not looked for: too likely to occur by chance to cut answers on. */
export const MIN_ECHO_BYTES = 8

/** The forms of one secret an answer is searched for. */
export interface EchoNeedles {
  /** As bytes, for bodies. */
  readonly forms: readonly Buffer[]
  /** As text, for the status line and header values (which Node reads as Latin-1). */
  readonly texts: readonly string[]
  /** As text in lower case, for header names (Node spells them so; they are ASCII tokens). */
  readonly lowerTexts: readonly string[]
  /**
   * Half of the secret's characters, rounded up: a chunk that ends with this many bytes of a
   * form's start is judged an echo (createEchoScanner). Every form spends at least a byte on
   * each character, so no form's start of fewer bytes tells half of the secret.
   */
  readonly half: number
}

export const NO_NEEDLES: EchoNeedles = { forms: [], texts: [], lowerTexts: [], half: 0 }

/** The forms of a secret an answer is searched for; none for a secret too short to look for. */
export function echoNeedles(secret: string): EchoNeedles {
  if (Buffer.byteLength(secret) < MIN_ECHO_BYTES) return NO_NEEDLES
  const lowerHex = (s: string) => s.replace(/%[0-9A-F]{2}/g, (h) => h.toLowerCase())
  const encoded = encodeURIComponent(secret)
  // As other encoders write it: Go's QueryEscape and Python's quote_plus also encode !'()*;
  // URLSearchParams (a form) and Java's URLEncoder !'()~ but not *.
  const hex = (c: string) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`
  const texts = new Set<string>([secret, secret.replaceAll('/', '\\/')])
  for (const e of [encoded, encoded.replace(/[!'()*]/g, hex), encoded.replace(/[!'()~]/g, hex)]) {
    const slashKept = e.replaceAll('%2F', '/')
    for (const f of [e, lowerHex(e), slashKept, lowerHex(slashKept)]) texts.add(f)
  }
  const forms = [...texts].map((t) => Buffer.from(t))
  // Node reads a header as Latin-1: a header holding the secret's UTF-8 bytes reads as this.
  const headerTexts = [...texts]
  if ([...secret].some((c) => (c.codePointAt(0) as number) > 0x7f)) {
    // And it sends a header as Latin-1: an echo of those bytes in a body.
    forms.push(Buffer.from(secret, 'latin1'))
    headerTexts.push(Buffer.from(secret).toString('latin1'))
  }
  // Header names are ASCII tokens: only A-Z is lowered.
  const lower = (t: string) => t.replace(/[A-Z]/g, (c) => c.toLowerCase())
  return {
    forms,
    texts: headerTexts,
    lowerTexts: [...new Set(headerTexts.map(lower))],
    half: Math.ceil([...secret].length / 2),
  }
}

/** Whether `text` (a header value, a whole body) holds any of the needles. */
export function holdsEcho(text: string | Buffer, needles: EchoNeedles): boolean {
  if (typeof text === 'string') return holdsText(text, needles.texts)
  for (const n of needles.forms) if (text.includes(n)) return true
  return false
}

function holdsText(text: string, texts: readonly string[]): boolean {
  for (const t of texts) if (text.includes(t)) return true
  return false
}

/**
 * The name of a response header whose value holds a needle, `(a header's name)` for one whose
 * name does (the name is logged: found in review, it wrote the secret into the proxy's log), or null.
 */
export function headerEcho(
  headers: Readonly<Record<string, string | string[] | number | undefined>>,
  needles: EchoNeedles,
): string | null {
  const { texts, lowerTexts } = needles
  if (texts.length === 0) return null
  for (const name in headers) {
    const value = headers[name]
    if (value === undefined) continue
    if (holdsText(name, lowerTexts)) return "(a header's name)"
    if (Array.isArray(value)) {
      for (const v of value) if (holdsText(v, texts)) return name
    } else if (holdsText(typeof value === 'string' ? value : String(value), texts)) return name
  }
  return null
}

/**
 * Whether an answer's body is encoded otherwise than as sent (so it cannot be searched): a
 * Content-Encoding, or a Transfer-Encoding other than chunked (which Node and undici undo; a
 * `gzip, chunked` body arrives gzipped).
 */
export function answerEncoded(headers: Readonly<Record<string, string | string[] | undefined>>): boolean {
  const content = headers['content-encoding']
  const transfer = headers['transfer-encoding']
  // Most answers: neither, or plain chunked.
  if (content === undefined && (transfer === undefined || transfer === 'chunked')) return false
  return namesOther(content, 'identity') || namesOther(transfer, 'chunked')
}

/** Whether a coding list names any coding but `allowed`. */
function namesOther(value: string | string[] | undefined, allowed: string): boolean {
  if (value === undefined) return false
  const list = Array.isArray(value) ? value.join(',') : value
  return list.split(',').some((c) => c.trim() !== '' && c.trim().toLowerCase() !== allowed)
}

/**
 * A body searched chunk by chunk as it streams, each chunk judged before it is relayed. A needle
 * split across two chunks is found in the second, by keeping the end of the first. The first
 * chunk's end, relayed already, could then hold the needle's start: so a chunk that ends with at
 * least `half` bytes of a form's start is judged an echo itself. Fewer tell less than half of the
 * secret's characters (it is at least 8 bytes), and an answer that happens to end a chunk with
 * them is not cut.
 */
export interface EchoScanner {
  /** Whether this chunk, with what came before it, holds (or ends with half of) a needle. */
  push(chunk: Buffer | string): boolean
}

export function createEchoScanner(needles: EchoNeedles): EchoScanner {
  const { forms, half } = needles
  const keep = forms.reduce((n, b) => Math.max(n, b.length), 0) - 1
  let carry: Buffer | null = null
  return {
    push(chunk) {
      const bytes = typeof chunk === 'string' ? Buffer.from(chunk) : chunk
      // The chunk is searched where it lies; only the seam with the last one is copied.
      const seam = carry ? Buffer.concat([carry, bytes.subarray(0, keep)]) : null
      const end = bytes.length >= keep || !seam ? bytes : seam
      for (const n of forms) {
        if (bytes.includes(n) || seam?.includes(n)) return true
        if (endsWithStartOf(end, n, half)) return true
      }
      const tail = end.length > keep ? end.subarray(end.length - keep) : end
      // A copy: the chunk's memory may be reused once it is relayed.
      carry = keep > 0 ? Buffer.from(tail) : null
      return false
    },
  }
}

/** Whether `window` ends with the first k bytes of `needle`, for some k from `half` up. */
function endsWithStartOf(window: Buffer, needle: Buffer, half: number): boolean {
  const first = needle[0] as number
  // Only where the needle's first byte occurs among the window's last needle.length - 1 bytes.
  for (let at = Math.max(0, window.length - needle.length + 1); at <= window.length - half; at++) {
    if (window[at] !== first) continue
    if (window.compare(needle, 0, window.length - at, at, window.length) === 0) return true
  }
  return false
}
