import { once } from 'node:events'
import { createServer } from 'node:http'
import { connect } from 'node:net'
import t from 'tap'
import { guardServer } from '../../src/node-http/guarded-server.js'
import { capturingLogger, LOG_LEVEL } from '../helpers/proxy.js'

/** Writes `bytes` on a fresh connection and reads until the server closes it. */
async function exchange(port: number, bytes: string, keepSending = false): Promise<string> {
  const socket = connect(port, '127.0.0.1')
  socket.on('error', () => {})
  await once(socket, 'connect')
  const chunks: Buffer[] = []
  socket.on('data', (c: Buffer) => chunks.push(c))
  socket.write(bytes)
  // A client that does not stop sending once answered: the server still closes.
  const more = keepSending
    ? setInterval(() => socket.writable && socket.write('more garbage\r\n'), 20)
    : undefined
  await once(socket, 'close')
  clearInterval(more)
  return Buffer.concat(chunks).toString('latin1')
}

t.test('a guarded server answers what it cannot parse in the registry shape, and closes', async (t) => {
  const { logger, lines } = capturingLogger()
  // Short time limits, checked often, so a slow request times out within the test.
  const server = guardServer(
    createServer({ headersTimeout: 300, requestTimeout: 600, connectionsCheckingInterval: 50 }, (_req, res) =>
      res.end('ok'),
    ),
    logger,
  )
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  t.teardown(() => server.close())
  const port = (server.address() as { port: number }).port

  const garbage = await exchange(port, 'NOT HTTP AT ALL\r\n\r\n', true)
  t.match(garbage, /^HTTP\/1\.1 400 Bad Request\r\n/)
  t.match(garbage, /\r\nconnection: close\r\n/)
  t.match(garbage, /\r\n\r\n\{"error":"invalid request","code":"invalid_request"\}$/)

  const big = await exchange(port, `GET /${'a'.repeat(20_000)} HTTP/1.1\r\nhost: x\r\n\r\n`)
  t.match(big, /^HTTP\/1\.1 431 Request Header Fields Too Large\r\n/)
  t.match(big, /"code":"headers_too_large"/)

  const slow = await exchange(port, 'GET / HTTP/1.1\r\nhost: x\r\n')
  t.match(slow, /^HTTP\/1\.1 408 Request Timeout\r\n/)
  t.match(slow, /"code":"request_timeout"/)

  t.ok(
    lines.some((l) => l.msg === 'client error'),
    'client errors are logged',
  )
  t.same(
    lines.filter((l) => l.level > LOG_LEVEL.debug),
    [],
    'at debug only',
  )
})
