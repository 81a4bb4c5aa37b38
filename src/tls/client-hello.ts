import { isIP } from 'node:net'

/**
 * The server name of a TLS ClientHello, read before the handshake so the TLS port can choose
 * between terminating a connection and passing it through opaque (RFC 8446 §4.1.2, RFC 6066
 * §3). Node reads the SNI only inside a handshake it has already taken over, and no maintained
 * library does this one thing, so it is read here: bounds-checked, every length trusted only
 * as far as the bytes that are there.
 */
export type ClientHello =
  /** Not all of the ClientHello has arrived yet: nothing more can be read before `need` bytes. */
  | { kind: 'incomplete'; need: number }
  /** Not a TLS ClientHello (plain HTTP, garbage, an SSL 2 hello), or a malformed one. */
  | { kind: 'not_tls' }
  | { kind: 'hello'; serverName: string | null }

/** A ClientHello spans at most this many bytes of records (post-quantum key shares included). */
export const MAX_CLIENT_HELLO_BYTES = 64 * 1024

/**
 * And at most this many records: clients send it in one or a few. Each arrival is read again
 * from the start, so a hello of thousands of one-byte records cost seconds of CPU (found in
 * review: 5.4 s for one connection's 64 KiB).
 */
export const MAX_CLIENT_HELLO_RECORDS = 64

const HANDSHAKE = 0x16
const CLIENT_HELLO = 0x01
const SERVER_NAME = 0x0000
const HOST_NAME = 0x00
const HOST = /^[a-z0-9](?:[a-z0-9-]{0,62})(?:\.[a-z0-9](?:[a-z0-9-]{0,62}))*\.?$/

export function readClientHello(bytes: Buffer): ClientHello {
  // The handshake message may span records: gather their fragments first.
  const fragments: Buffer[] = []
  let gathered = 0
  let needed = -1
  let at = 0
  while (needed < 0 || gathered < needed) {
    if (fragments.length === MAX_CLIENT_HELLO_RECORDS) return { kind: 'not_tls' }
    if (bytes.length < at + 5) return incompleteOr(bytes, at + 5)
    if (bytes[at] !== HANDSHAKE || bytes[at + 1] !== 0x03) return { kind: 'not_tls' }
    const length = bytes.readUInt16BE(at + 3)
    if (length === 0 || length > 16_384 + 2048) return { kind: 'not_tls' }
    if (bytes.length < at + 5 + length) return incompleteOr(bytes, at + 5 + length)
    const fragment = bytes.subarray(at + 5, at + 5 + length)
    fragments.push(fragment)
    gathered += fragment.length
    at += 5 + length
    if (needed < 0 && gathered >= 4) {
      const head = Buffer.concat(fragments)
      if (head[0] !== CLIENT_HELLO) return { kind: 'not_tls' }
      needed = 4 + head.readUIntBE(1, 3)
      if (needed > MAX_CLIENT_HELLO_BYTES) return { kind: 'not_tls' }
    }
  }
  const hello = Buffer.concat(fragments).subarray(4, needed)
  const serverName = serverNameOf(hello)
  return serverName === undefined ? { kind: 'not_tls' } : { kind: 'hello', serverName }
}

function incompleteOr(bytes: Buffer, need: number): ClientHello {
  return bytes.length >= MAX_CLIENT_HELLO_BYTES ? { kind: 'not_tls' } : { kind: 'incomplete', need }
}

/** The host name in the hello's server_name extension; null without one; undefined if malformed. */
function serverNameOf(hello: Buffer): string | null | undefined {
  let at = 2 + 32 // legacy_version, random
  const skip = (lengthBytes: 1 | 2): boolean => {
    if (hello.length < at + lengthBytes) return false
    const n = lengthBytes === 1 ? (hello[at] as number) : hello.readUInt16BE(at)
    at += lengthBytes + n
    return at <= hello.length
  }
  if (!skip(1) || !skip(2) || !skip(1)) return undefined // session id, cipher suites, compression
  if (at === hello.length) return null // no extensions
  if (hello.length < at + 2) return undefined
  const end = at + 2 + hello.readUInt16BE(at)
  if (end > hello.length) return undefined
  at += 2
  while (at + 4 <= end) {
    const type = hello.readUInt16BE(at)
    const length = hello.readUInt16BE(at + 2)
    const data = at + 4
    if (data + length > end) return undefined
    if (type === SERVER_NAME) return hostNameOf(hello.subarray(data, data + length))
    at = data + length
  }
  return at === end ? null : undefined
}

function hostNameOf(ext: Buffer): string | null | undefined {
  if (ext.length < 2 || 2 + ext.readUInt16BE(0) !== ext.length) return undefined
  let at = 2
  while (at + 3 <= ext.length) {
    const type = ext[at] as number
    const length = ext.readUInt16BE(at + 1)
    if (at + 3 + length > ext.length) return undefined
    if (type === HOST_NAME) {
      const name = ext
        .subarray(at + 3, at + 3 + length)
        .toString('latin1')
        .toLowerCase()
      // RFC 6066: a DNS host name, no trailing dot, no IP literal; anything else is no name we can serve.
      return name.length <= 253 && HOST.test(name) && !name.endsWith('.') && isIP(name) === 0
        ? name
        : undefined
    }
    at += 3 + length
  }
  return null
}
