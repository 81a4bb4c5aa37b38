import { once } from 'node:events'
import { createServer, type IncomingMessage } from 'node:http'
import { connect } from 'node:net'
import t from 'tap'
import { BodyAborted, readBody } from '../../src/node-http/read-body.js'

/**
 * gate-proxy decides (asynchronously) before it reads a STEP_UP body. A client that resets in
 * between leaves a request that will never end nor fail again: reading it must settle, as a
 * client gone, not wait for ever holding the request.
 */
t.test('reading the body of a request that already went away rejects', { timeout: 10_000 }, async (t) => {
  const requests: IncomingMessage[] = []
  const server = createServer((req) => requests.push(req))
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  t.teardown(() => server.close())
  const socket = connect((server.address() as { port: number }).port, '127.0.0.1')
  socket.on('error', () => {})
  socket.write(
    'POST / HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{"a":',
  )
  while (requests.length === 0) await new Promise((r) => setTimeout(r, 5))
  const req = requests[0] as IncomingMessage
  socket.resetAndDestroy()
  // Not events.once: it listens for 'error', which makes the request emit one.
  await new Promise((resolve) => req.once('close', resolve))
  const err = await readBody(req, 1000).then(
    () => null,
    (e: unknown) => e,
  )
  t.ok(err instanceof BodyAborted, 'rejects: the client went away')
})
