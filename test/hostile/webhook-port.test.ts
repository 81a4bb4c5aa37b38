import { randomBytes } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { connect, type Socket } from 'node:net'
import { join } from 'node:path'
import { connect as tlsConnect } from 'node:tls'
import t, { type Test } from 'tap'
import { parseSettings } from '../../src/config/load.js'
import { createInjector } from '../../src/injector/injector-process.js'
import {
  eachShape,
  get,
  H2_PREFACE,
  idleSockets,
  jsonBody,
  open,
  post,
  type Target,
  tlsClientHello,
  watchUnhandled,
} from '../helpers/hostile-client.js'
import { capturingLogger, LOG_LEVEL } from '../helpers/proxy.js'
import { selfSigned } from '../helpers/self-signed.js'

/** A raw TCP connection to the port, no TLS: resolves once connected. */
async function tcp(port: number): Promise<Socket> {
  const socket = connect(port, '127.0.0.1')
  socket.on('error', () => {})
  socket.resume()
  await new Promise((resolve) => socket.once('connect', resolve))
  return socket
}

/** Resolves once the server has closed (or reset) the connection. */
const closed = (socket: Socket) =>
  new Promise<void>((resolve) => (socket.destroyed ? resolve() : socket.once('close', () => resolve())))

/**
 * The injector's admission webhook speaks HTTPS to the Kubernetes API server, but anything on
 * the network can reach its port. No client may crash it or wedge the port: after every shape,
 * over TLS and below it, the webhook still answers a review.
 */
t.test('hostile clients on the injector webhook', async (t) => {
  const unhandled = watchUnhandled(t)
  const { logger, lines } = capturingLogger()
  const cert = selfSigned('injector-hostile')
  const injector = createInjector(
    parseSettings({
      log: { level: 'debug' },
      injector: {
        host: '127.0.0.1',
        port: 0,
        tls: { certFile: cert.cert, keyFile: cert.key },
        proxy: { image: 'registry.example/writegate:1.2.3' },
      },
    }),
    { logger },
  )
  const { port } = await injector.listen()
  t.teardown(() => injector.close())
  const target: Target = { name: 'over TLS', port, ca: cert.pem, probe: '/healthz', post: '/mutate' }
  const review = readFileSync(
    join(import.meta.dirname, '..', 'injector', 'fixtures', 'review-annotated-pod.json'),
    'utf8',
  )

  async function stillServes(t: Test, after: string): Promise<void> {
    t.equal((await get(target)).status, 200, `healthz answers after ${after}`)
    const answer = await post(target, '/mutate', review)
    t.match(jsonBody(answer), { response: { allowed: true } }, `a review is answered after ${after}`)
    t.same(unhandled.splice(0), [], `nothing unhandled after ${after}`)
  }

  eachShape(t, [target], stillServes)

  const belowTls: [string, (s: Socket) => Promise<void>][] = [
    ['plain HTTP', async (s) => void s.write('GET /healthz HTTP/1.1\r\nhost: localhost\r\n\r\n')],
    ['the HTTP/2 preface', async (s) => void s.write(H2_PREFACE)],
    // An application-data record before any handshake.
    ['a record out of turn', async (s) => void s.write(Buffer.from([0x17, 3, 3, 0, 5, 1, 2, 3, 4, 5]))],
    ['random bytes', async (s) => void s.write(randomBytes(2048))],
    [
      'a ClientHello, then a reset',
      async (s) => {
        s.write(await tlsClientHello())
        s.resetAndDestroy()
      },
    ],
    [
      'half a ClientHello, then a close',
      async (s) => {
        const hello = await tlsClientHello()
        s.end(hello.subarray(0, hello.length >> 1))
      },
    ],
  ]
  for (const [name, send] of belowTls) {
    t.test(`below TLS: ${name}`, { timeout: 10_000 }, async (t) => {
      const s = await tcp(port)
      await send(s)
      await closed(s)
      await stillServes(t, name)
    })
  }

  t.test('a TLS 1.1 client is refused at the handshake', async (t) => {
    const raw = await tcp(port)
    const tls = tlsConnect({
      socket: raw,
      ca: cert.pem,
      servername: 'localhost',
      maxVersion: 'TLSv1.1',
      minVersion: 'TLSv1',
    })
    const failed = await new Promise<boolean>((resolve) => {
      tls.once('secureConnect', () => resolve(false))
      tls.once('error', () => resolve(true))
    })
    t.ok(failed, 'no session below TLS 1.2')
    await stillServes(t, 'a TLS 1.1 handshake')
  })

  t.test('a handshake, then bytes that are no TLS record', async (t) => {
    const raw = await open(target)
    raw.tcp.write(Buffer.from('not a record'))
    await closed(raw.tcp)
    await stillServes(t, 'a broken TLS record')
  })

  // The limit only catches a hang (200 TLS handshakes on a loaded machine are slow); the
  // sockets are released anyway.
  t.test('300 idle connections, some mid-handshake', { timeout: 90_000 }, async (t) => {
    const bare = await Promise.all(Array.from({ length: 100 }, () => tcp(port)))
    t.teardown(() => {
      for (const s of bare) s.resetAndDestroy()
    })
    const release = await idleSockets(target, 200)
    t.teardown(release)
    await stillServes(t, '300 idle connections')
  })

  t.test('a client is never logged as an error', async (t) => {
    t.same(
      lines.filter((l) => l.level >= LOG_LEVEL.error),
      [],
    )
  })
})
