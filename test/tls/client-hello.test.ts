import { once } from 'node:events'
import { createServer, type Socket } from 'node:net'
import { connect as tlsConnect } from 'node:tls'
import t from 'tap'
import { readClientHello } from '../../src/tls/client-hello.js'

/** The SNI of real ClientHellos (Node's TLS, any servername), and what is not one. */

async function helloFor(servername: string | undefined): Promise<Buffer> {
  const server = createServer()
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const got = once(server, 'connection').then(async ([socket]) => {
    ;(socket as Socket).on('error', () => {})
    const [chunk] = (await once(socket as Socket, 'data')) as [Buffer]
    ;(socket as Socket).destroy()
    return chunk
  })
  const client = tlsConnect({
    port: (server.address() as { port: number }).port,
    host: '127.0.0.1',
    ...(servername ? { servername } : {}),
  })
  client.on('error', () => {})
  const hello = await got
  client.destroy()
  server.close()
  return hello
}

t.test('a real ClientHello: the server name, whole or in any two pieces', async (t) => {
  const hello = await helloFor('API.Example.com')
  t.same(readClientHello(hello), { kind: 'hello', serverName: 'api.example.com' })
  for (let i = 0; i < hello.length; i++)
    t.same(
      readClientHello(hello.subarray(0, i)),
      // Nothing more can be read before the record header, then the whole record.
      { kind: 'incomplete', need: i < 5 ? 5 : hello.length },
      `the first ${i} bytes`,
    )
})

t.test('no server name: Node sends none for an IP address', async (t) => {
  t.same(readClientHello(await helloFor(undefined)), { kind: 'hello', serverName: null })
})

t.test('a hello split over two records is read', async (t) => {
  const hello = await helloFor('billing.example.com')
  const body = hello.subarray(5)
  const record = (b: Buffer) =>
    Buffer.concat([Buffer.from([0x16, 0x03, 0x01, b.length >> 8, b.length & 255]), b])
  const split = Buffer.concat([record(body.subarray(0, 10)), record(body.subarray(10))])
  t.same(readClientHello(split), { kind: 'hello', serverName: 'billing.example.com' })
})

t.test(
  'a hello in one-byte records: read up to 64 records, refused past them (found in review)',
  async (t) => {
    const hello = await helloFor('billing.example.com')
    const body = hello.subarray(5)
    const record = (b: Buffer) =>
      Buffer.concat([Buffer.from([0x16, 0x03, 0x01, b.length >> 8, b.length & 255]), b])
    const inRecords = (size: number) => {
      const parts: Buffer[] = []
      for (let i = 0; i < body.length; i += size) parts.push(record(body.subarray(i, i + size)))
      return Buffer.concat(parts)
    }
    const few = Math.ceil(body.length / 64)
    t.same(
      readClientHello(inRecords(few)),
      { kind: 'hello', serverName: 'billing.example.com' },
      `${few}-byte records`,
    )
    // Thousands of one-byte records were read again from the start at every arrival: seconds of CPU.
    t.same(readClientHello(inRecords(1)), { kind: 'not_tls' }, 'one-byte records')
    t.same(
      readClientHello(inRecords(1).subarray(0, 6 * 65)),
      { kind: 'not_tls' },
      'refused at the 65th, not at the end',
    )
  },
)

t.test('what is not a ClientHello, or lies about its lengths', async (t) => {
  const hello = await helloFor('api.example.com')
  const cases: [string, Buffer][] = [
    ['plain HTTP', Buffer.from('GET / HTTP/1.1\r\nhost: x\r\n\r\n')],
    ['an alert record', Buffer.from([0x15, 0x03, 0x01, 0x00, 0x02, 0x02, 0x28])],
    ['an empty record', Buffer.from([0x16, 0x03, 0x01, 0x00, 0x00])],
    ['a ServerHello', Buffer.concat([hello.subarray(0, 5), Buffer.from([0x02]), hello.subarray(6)])],
    [
      'a handshake length past 64 KiB',
      Buffer.concat([hello.subarray(0, 5), Buffer.from([0x01, 0x01, 0x00, 0x00]), hello.subarray(9)]),
    ],
    ['64 KiB of records that never end the hello', Buffer.alloc(70_000, 0x16)],
  ]
  for (const [name, bytes] of cases) t.same(readClientHello(bytes), { kind: 'not_tls' }, name)
  // Every length field corrupted in turn: never a throw, never a name that was not sent.
  for (let i = 5; i < hello.length; i++) {
    const bad = Buffer.from(hello)
    bad[i] = 0xff
    const r = readClientHello(bad)
    if (r.kind === 'hello' && r.serverName !== null && r.serverName !== 'api.example.com')
      t.fail(`byte ${i}: read ${r.serverName}`)
  }
  // The name swapped in place for one of the same length: an IP literal, a space, an empty label.
  const at = hello.indexOf('api.example.com')
  for (const name of ['192.168.100.200', 'host with space', 'api..xample.com', 'api.example.co.']) {
    const bad = Buffer.from(hello)
    bad.write(name, at, 'latin1')
    t.same(readClientHello(bad), { kind: 'not_tls' }, `${name} is no host name`)
  }
})
