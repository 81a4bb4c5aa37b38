import { randomBytes } from 'node:crypto'
import { once } from 'node:events'
import { connect, createServer, type Socket } from 'node:net'
import { Duplex } from 'node:stream'
import { type TLSSocket, connect as tlsConnect } from 'node:tls'
import type { Test } from 'tap'

/**
 * Hostile clients at the socket level: raw `node:net` (and `node:tls`) sockets sending what no
 * well-behaved client sends, and resets (RST, `resetAndDestroy`) at every moment of an exchange.
 * Every client socket here handles its own errors, so an error a test sees on the process is
 * the server's.
 */

/** A listening port under test. */
export interface Target {
  name: string
  port: number
  /** The CA to trust when the port serves HTTPS (the handshake is done before the shape). */
  ca?: string
  /** A GET that answers 200: the proof the port still serves. */
  probe: string
  /** A GET whose answer takes a while (streamed or large), to reset during it. */
  long?: string
  /** A POST that reads its body. */
  post: string
  /** Headers a request needs (a bearer key, say). */
  headers?: Record<string, string>
}

/** What came back on a raw socket before the shape stopped reading. */
export interface Seen {
  bytes: Buffer
  /** The status line, if an answer came. */
  status: number | null
  text: string
}

function seen(bytes: Buffer): Seen {
  const text = bytes.toString('latin1')
  const m = /^HTTP\/1\.[01] (\d{3})/.exec(text)
  return { bytes, status: m ? Number(m[1]) : null, text }
}

/** The JSON body of a raw answer (after the headers), or null. */
export function jsonBody(s: Seen): Record<string, unknown> | null {
  const at = s.text.indexOf('\r\n\r\n')
  if (at < 0) return null
  try {
    return JSON.parse(s.text.slice(at + 4)) as Record<string, unknown>
  } catch {
    return null
  }
}

interface Raw {
  /** The TCP socket underneath (reset this one: a TLS socket cannot be reset itself). */
  tcp: Socket
  /** What the shape writes to and reads from: the TCP socket, or TLS over it. */
  io: Socket | TLSSocket
  received: Buffer[]
  /** Resolves on the next data or close. */
  next(): Promise<void>
}

/**
 * A stream that relays to a TCP socket. TLS runs over it rather than over the socket itself:
 * node:tls takes over a net.Socket's handle, and resetting that socket then crashes Node (a
 * segfault in the client, Node 20). Over a relay the TCP socket stays ours to reset.
 */
function relay(tcp: Socket): Duplex {
  const stream = new Duplex({
    read() {},
    write(chunk, _encoding, done) {
      if (tcp.destroyed) done()
      else tcp.write(chunk, () => done())
    },
    final(done) {
      tcp.end()
      done()
    },
  })
  tcp.on('data', (c: Buffer) => stream.push(c))
  tcp.on('end', () => stream.push(null))
  tcp.on('close', () => stream.destroy())
  return stream
}

/** Opens a raw connection to the target; over TLS, resolves once the handshake is done. */
export async function open(target: Target): Promise<Raw> {
  const tcp = connect(target.port, '127.0.0.1')
  tcp.on('error', () => {})
  await once(tcp, 'connect')
  let io: Socket | TLSSocket = tcp
  if (target.ca) {
    const tls = tlsConnect({ socket: relay(tcp), ca: target.ca, servername: 'localhost' })
    tls.on('error', () => {})
    // A server that cuts the handshake (its handshake timeout) closes the relay without an
    // error: without the 'close', this waited for ever.
    await new Promise<void>((resolve, reject) => {
      tls.once('secureConnect', resolve)
      tls.once('close', () => reject(new Error('closed before the TLS handshake completed')))
    })
    io = tls
  }
  const received: Buffer[] = []
  let wake: (() => void)[] = []
  const notify = () => {
    const woken = wake
    wake = []
    for (const w of woken) w()
  }
  io.on('data', (c: Buffer) => {
    received.push(c)
    notify()
  })
  io.once('close', notify)
  const next = () => new Promise<void>((resolve) => wake.push(resolve))
  return { tcp, io, received, next }
}

/** Sends an RST (not a FIN): the peer's next read or write fails with ECONNRESET. */
function reset(raw: Raw): void {
  if (!raw.tcp.destroyed) raw.tcp.resetAndDestroy()
  if (!raw.io.destroyed) raw.io.destroy()
}

/** Resolves once the received bytes satisfy `done`, or the socket closes. */
async function until(raw: Raw, done: (bytes: Buffer) => boolean): Promise<Seen> {
  for (;;) {
    const bytes = Buffer.concat(raw.received)
    if (done(bytes) || raw.io.destroyed) return seen(bytes)
    await raw.next()
  }
}

const headersDone = (b: Buffer) => b.includes('\r\n\r\n')
/** A whole answer: its Content-Length read, or its last chunk (or any answer once the socket closes). */
function answerDone(b: Buffer): boolean {
  const at = b.indexOf('\r\n\r\n')
  if (at < 0) return false
  const head = b.subarray(0, at).toString('latin1')
  if (/\r\ntransfer-encoding: *chunked/i.test(head)) return b.subarray(at).includes('\r\n0\r\n\r\n')
  const m = /\r\ncontent-length: *(\d+)/i.exec(head)
  return m !== null && b.length >= at + 4 + Number(m[1])
}

function headerLines(target: Target, extra: Record<string, string> = {}): string {
  const all = { host: 'localhost', ...(target.headers ?? {}), ...extra }
  return Object.entries(all)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('')
}

/** Sends bytes on a fresh connection and reads until the server closes it. */
export async function sendAndRead(target: Target, bytes: string | Buffer): Promise<Seen> {
  const raw = await open(target)
  raw.io.write(bytes)
  const s = await until(raw, () => false)
  reset(raw)
  return s
}

let clientHello: Buffer | undefined
/** The first flight of a real TLS client: its ClientHello, captured from node:tls. */
export async function tlsClientHello(): Promise<Buffer> {
  if (clientHello) return clientHello
  const server = createServer()
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const port = (server.address() as { port: number }).port
  const got = once(server, 'connection').then(async ([socket]) => {
    socket.on('error', () => {})
    const [chunk] = (await once(socket, 'data')) as [Buffer]
    ;(socket as Socket).destroy()
    return chunk
  })
  const client = tlsConnect({ port, host: '127.0.0.1', servername: 'localhost' })
  client.on('error', () => {})
  clientHello = await got
  client.destroy()
  server.close()
  return clientHello
}

/** The HTTP/2 connection preface and an empty SETTINGS frame, as an h2 client opens with. */
export const H2_PREFACE = Buffer.concat([
  Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1'),
  Buffer.from([0, 0, 0, 4, 0, 0, 0, 0, 0]),
])

/** Connections a shape leaves open on purpose, until the ports have been probed. */
const leftOpen: Raw[] = []

/** One hostile thing a client can do; `seen` is what came back, when an answer is expected. */
export interface Shape {
  name: string
  run(target: Target): Promise<Seen | null>
  /** The answer every port must give, when the shape is one a server can answer. */
  expect?: { status: number; code: string }
}

const BAD_REQUEST = { status: 400, code: 'invalid_request' }
const HEADERS_TOO_LARGE = { status: 431, code: 'headers_too_large' }

/** Shapes that every HTTP port (plain, or HTTPS after the handshake) must survive. */
export const HTTP_SHAPES: Shape[] = [
  {
    name: 'reset right after connecting',
    async run(target) {
      reset(await open(target))
      return null
    },
  },
  {
    name: 'reset halfway through the request line',
    async run(target) {
      const raw = await open(target)
      raw.io.write('GET /heal')
      await new Promise((r) => setImmediate(r))
      reset(raw)
      return null
    },
  },
  {
    name: 'reset once the headers are sent, before the answer',
    async run(target) {
      const raw = await open(target)
      raw.io.write(`GET ${target.long ?? target.probe} HTTP/1.1\r\n${headerLines(target)}\r\n`)
      reset(raw)
      return null
    },
  },
  {
    name: 'reset during the answer',
    async run(target) {
      const raw = await open(target)
      raw.io.write(`GET ${target.long ?? target.probe} HTTP/1.1\r\n${headerLines(target)}\r\n`)
      const s = await until(raw, (b) => b.length > 0)
      reset(raw)
      return s
    },
  },
  {
    name: 'reset after the answer, on a kept-alive connection',
    async run(target) {
      const raw = await open(target)
      raw.io.write(`GET ${target.probe} HTTP/1.1\r\n${headerLines(target)}\r\n`)
      const s = await until(raw, answerDone)
      reset(raw)
      return s
    },
  },
  {
    name: 'pipelined requests, reset after the first answer',
    async run(target) {
      const raw = await open(target)
      const one = `GET ${target.probe} HTTP/1.1\r\n${headerLines(target)}\r\n`
      raw.io.write(one + one + one)
      const s = await until(raw, answerDone)
      reset(raw)
      return s
    },
  },
  {
    name: 'a TLS ClientHello',
    expect: BAD_REQUEST,
    async run(target) {
      return sendAndRead(target, await tlsClientHello())
    },
  },
  {
    name: 'the HTTP/2 connection preface',
    expect: BAD_REQUEST,
    async run(target) {
      return sendAndRead(target, H2_PREFACE)
    },
  },
  {
    name: 'garbage bytes',
    expect: BAD_REQUEST,
    async run(target) {
      return sendAndRead(target, Buffer.concat([Buffer.from('\x00\x01\xff'), randomBytes(4096)]))
    },
  },
  {
    name: 'a half-sent body, then close',
    async run(target) {
      const raw = await open(target)
      raw.io.write(
        `POST ${target.post} HTTP/1.1\r\n${headerLines(target, { 'content-type': 'application/json', 'content-length': '100000' })}\r\n{"a":`,
      )
      raw.io.end()
      const s = await until(raw, () => false)
      reset(raw)
      return s
    },
  },
  {
    name: 'a half-sent body, then idle (while the port is probed)',
    async run(target) {
      const raw = await open(target)
      raw.io.write(
        `POST ${target.post} HTTP/1.1\r\n${headerLines(target, { 'content-type': 'application/json', 'content-length': '100000' })}\r\n{"a":`,
      )
      leftOpen.push(raw)
      return null
    },
  },
  {
    name: 'a half-sent body, then reset',
    async run(target) {
      const raw = await open(target)
      raw.io.write(
        `POST ${target.post} HTTP/1.1\r\n${headerLines(target, { 'content-type': 'application/json', 'content-length': '100000' })}\r\n{"a":`,
      )
      await new Promise((r) => setTimeout(r, 20))
      reset(raw)
      return null
    },
  },
  {
    name: 'Expect: 100-continue, then reset before the body',
    async run(target) {
      const raw = await open(target)
      raw.io.write(
        `POST ${target.post} HTTP/1.1\r\n${headerLines(target, { 'content-type': 'application/json', 'content-length': '10', expect: '100-continue' })}\r\n`,
      )
      const s = await until(raw, headersDone)
      reset(raw)
      return s
    },
  },
  {
    name: 'conflicting Content-Length and Transfer-Encoding',
    expect: BAD_REQUEST,
    async run(target) {
      return sendAndRead(
        target,
        `POST ${target.post} HTTP/1.1\r\n${headerLines(target, { 'content-type': 'application/json', 'content-length': '4', 'transfer-encoding': 'chunked' })}\r\n2\r\n{}\r\n0\r\n\r\n`,
      )
    },
  },
  {
    name: 'an oversize request line',
    expect: HEADERS_TOO_LARGE,
    async run(target) {
      return sendAndRead(target, `GET /${'a'.repeat(64 * 1024)} HTTP/1.1\r\n${headerLines(target)}\r\n`)
    },
  },
  {
    name: 'too many headers',
    expect: HEADERS_TOO_LARGE,
    async run(target) {
      const many = Array.from({ length: 5000 }, (_, i) => `x-h${i}: ${i}\r\n`).join('')
      return sendAndRead(target, `GET ${target.probe} HTTP/1.1\r\n${headerLines(target)}${many}\r\n`)
    },
  },
  {
    name: 'CONNECT, then reset before the answer',
    async run(target) {
      const raw = await open(target)
      raw.io.write('CONNECT example.com:443 HTTP/1.1\r\nhost: example.com:443\r\n\r\n')
      reset(raw)
      return null
    },
  },
  {
    name: 'CONNECT, then reset after the answer',
    async run(target) {
      const raw = await open(target)
      raw.io.write('CONNECT example.com:443 HTTP/1.1\r\nhost: example.com:443\r\n\r\n')
      const s = await until(raw, headersDone)
      reset(raw)
      return s
    },
  },
  {
    name: 'Upgrade: websocket, then reset',
    async run(target) {
      const raw = await open(target)
      raw.io.write(
        `GET ${target.probe} HTTP/1.1\r\n${headerLines(target, { connection: 'Upgrade', upgrade: 'websocket', 'sec-websocket-version': '13', 'sec-websocket-key': randomBytes(16).toString('base64') })}\r\n`,
      )
      const s = await until(raw, headersDone)
      reset(raw)
      return s
    },
  },
]

/**
 * Many idle connections that never finish a request: some silent, some stopped mid-header,
 * some half-closed (FIN sent) mid-header. Returns a function that resets them all.
 */
export async function idleSockets(target: Target, count: number): Promise<() => void> {
  // Over TLS on a loaded machine the server may cut some handshakes (its handshake timeout): those
  // are not idle connections, and the port serving the rest is what the callers check.
  const opened = await Promise.allSettled(Array.from({ length: count }, () => open(target)))
  const raws = opened.flatMap((o) => (o.status === 'fulfilled' ? [o.value] : []))
  if (raws.length < count / 2) {
    for (const raw of raws) reset(raw)
    throw new Error(`only ${raws.length} of ${count} connections opened`)
  }
  raws.forEach((raw, i) => {
    if (i % 3 === 1) raw.io.write(`GET ${target.probe} HTTP/1.1\r\nhost: local`)
    if (i % 3 === 2) raw.io.end(`POST ${target.post} HTTP/1.1\r\ncontent-le`)
  })
  return () => {
    for (const raw of raws) reset(raw)
  }
}

/** One plain GET on a fresh connection; resolves with the status and body. */
export async function get(target: Target, path = target.probe): Promise<Seen> {
  const raw = await open(target)
  raw.io.write(`GET ${path} HTTP/1.1\r\n${headerLines(target, { connection: 'close' })}\r\n`)
  const s = await until(raw, answerDone)
  raw.io.destroy()
  return s
}

/** One JSON POST on a fresh connection; resolves with the status and body. */
export async function post(target: Target, path: string, body: string): Promise<Seen> {
  const raw = await open(target)
  const headers = headerLines(target, {
    'content-type': 'application/json',
    'content-length': String(Buffer.byteLength(body)),
  })
  raw.io.write(`POST ${path} HTTP/1.1\r\n${headers}\r\n${body}`)
  const s = await until(raw, answerDone)
  raw.io.destroy()
  return s
}

/**
 * Runs every shape against every target, one subtest each, asserting the answer where the
 * shape has one, and then `serves` (which should prove every port of the process answers).
 */
export function eachShape(
  t: Test,
  targets: Target[],
  serves: (t: Test, after: string) => Promise<void>,
  shapes: Shape[] = HTTP_SHAPES,
): void {
  for (const target of targets) {
    for (const shape of shapes) {
      t.test(`${target.name}: ${shape.name}`, { timeout: 10_000 }, async (t) => {
        const seen = await shape.run(target)
        if (shape.expect) {
          t.equal(seen?.status, shape.expect.status, 'answered with the status')
          t.match(seen && jsonBody(seen), { code: shape.expect.code }, 'in JSON, with its code')
        }
        await serves(t, shape.name)
        for (const raw of leftOpen.splice(0)) reset(raw)
      })
    }
  }
}

/**
 * Errors the process did not handle while the servers under test ran in it. The watchers
 * keep the process alive, so a test can say which shape raised one instead of dying.
 */
export function watchUnhandled(t: Test): unknown[] {
  const errors: unknown[] = []
  const onError = (err: unknown) => errors.push(err)
  process.on('uncaughtException', onError)
  process.on('unhandledRejection', onError)
  t.teardown(() => {
    process.off('uncaughtException', onError)
    process.off('unhandledRejection', onError)
  })
  return errors
}
