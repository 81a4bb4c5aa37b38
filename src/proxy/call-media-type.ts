import { MIMEType } from 'node:util'

// Fatal: a server decoding invalid bytes its own way (U+FFFD, Python's surrogateescape) reads
// other text. And a byte-order mark is kept, so JSON.parse refuses it as some servers do.
const STRICT_UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true })

/** A body as UTF-8 text, or null when it is not valid UTF-8. */
export function utf8Text(body: Buffer): string | null {
  try {
    return STRICT_UTF8.decode(body)
  } catch {
    return null
  }
}

export const NOT_UTF8 = 'the body is not valid UTF-8'

/** Said after what makes a body ambiguous: why the gate refuses to decide one reading of it. */
export const READ_OTHERWISE = 'servers could read it otherwise than the gate'

/**
 * The media type of a body the gate reads as text (an MCP message, a GraphQL request), or why it
 * is refused. The gate reads bytes as UTF-8; a server reads them in the charset the request
 * names (Express's body parser honours any `utf-*`, UTF-7 included), and a body that reads as a
 * harmless call in one charset can read as a write in another. So only UTF-8, or no charset, is
 * read at all.
 */
export function callMediaType(contentType: string): { essence: string } | { problem: string } {
  let type: MIMEType
  try {
    type = new MIMEType(contentType)
  } catch {
    return { problem: 'the content-type does not parse' }
  }
  const charset = type.params.get('charset')
  if (charset !== null && !/^utf-?8$/i.test(charset))
    return { problem: `the body's charset is ${charset}: only UTF-8 is read` }
  // Parsers disagree on a second charset (MIMEType keeps the first, Express's the last) and on
  // one it cannot read (` charset = utf-7`): a header that names a charset other than the one
  // read here is refused.
  const named = contentType.match(/charset/gi)?.length ?? 0
  if (named > 1 || (named === 1 && charset === null))
    return { problem: 'the content-type names its charset more than once, or unreadably' }
  return { essence: type.essence }
}
