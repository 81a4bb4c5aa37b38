import { jsonAmbiguity } from '../core/json-ambiguity.js'
import { nestedDeeperThan } from '../core/json-depth.js'
import type { PendingAction } from '../store/ports/index.js'
import { HTTP_REPLAY_TOOL } from './staged-request.js'

/** What a human approves, shown as the agent sent it: the body decoded, not base64. */
export interface ReadableRequest {
  method: string
  path: string
  contentType: string | null
  /** The body's `Content-Encoding` as sent (`gzip`): its bytes are then shown as binary. */
  contentEncoding: string | null
  /** `json`: `body` is the parsed value; `text`: the UTF-8 text; `binary`: not shown (`body` null). */
  bodyEncoding: 'json' | 'text' | 'binary' | 'none'
  body: unknown
  bodyBytes: number
}

// ignoreBOM: a byte-order mark is kept, and shown marked, as the upstream gets it (a form parser
// that keeps it reads the first field under another name; found in review).
const STRICT_UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true })

export function readableRequest(a: PendingAction): ReadableRequest | null {
  if (a.tool !== HTTP_REPLAY_TOOL) return null
  const p = a.params as {
    method?: unknown
    path?: unknown
    contentType?: unknown
    body?: unknown
    headers?: Record<string, unknown>
  }
  const contentType = typeof p.contentType === 'string' ? p.contentType : null
  const encoding = p.headers?.['content-encoding']
  const contentEncoding = typeof encoding === 'string' ? encoding : null
  const bytes = typeof p.body === 'string' ? Buffer.from(p.body, 'base64') : Buffer.alloc(0)
  const base = {
    method: String(p.method ?? ''),
    path: String(p.path ?? ''),
    contentType,
    contentEncoding,
    bodyBytes: bytes.length,
  }
  if (bytes.length === 0) return { ...base, bodyEncoding: 'none', body: null }
  // Compressed (or otherwise encoded) bytes are not what the upstream reads: not shown as text.
  if (contentEncoding !== null && contentEncoding.trim().toLowerCase() !== 'identity')
    return { ...base, bodyEncoding: 'binary', body: null }
  let text: string
  try {
    text = STRICT_UTF8.decode(bytes)
  } catch {
    return { ...base, bodyEncoding: 'binary', body: null }
  }
  if (contentType && /\bjson\b/i.test(contentType)) {
    try {
      const body: unknown = JSON.parse(text)
      // Nested too deep to serialise back (the agent's body is not checked on the way in), or
      // read one way by JSON.parse and maybe another by the upstream (a member given twice, a
      // number whose digits are not the value JavaScript reads, names twice but for case): the exact text, not a tree that would show one reading.
      if (!nestedDeeperThan(body) && jsonAmbiguity(text, { goCase: true }) === null)
        return { ...base, bodyEncoding: 'json', body }
    } catch {}
  }
  return { ...base, bodyEncoding: 'text', body: text }
}
