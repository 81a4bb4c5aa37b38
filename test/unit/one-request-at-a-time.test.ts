import { createServer, type ServerResponse } from 'node:http'
import { connect } from 'node:net'
import t from 'tap'
import { MAX_WAITING, oneRequestAtATime } from '../../src/proxy/one-request-at-a-time.js'
import { sleep, waitFor } from '../helpers/wait.js'

/**
 * A client that pipelines many requests in one write, and whose first answer is slow: Node
 * parsed every one it had read and each waited in the queue, with nothing to push back (150,000
 * GETs held 284 MB of the proxy's heap; found in review). Reading now stops past MAX_WAITING,
 * so what waits stays within what one read brought in.
 */
t.test('a connection stops being read while many of its pipelined requests wait', async (t) => {
  let parsed = 0
  let answered = 0
  let first: ServerResponse | null = null
  const server = createServer(
    oneRequestAtATime((_req, res) => {
      if (first === null) {
        first = res
        return
      }
      answered++
      res.end('ok')
    }),
  )
  server.on('request', () => {
    parsed++
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()))
  t.teardown(() => {
    server.closeAllConnections()
    server.close()
  })
  const port = (server.address() as { port: number }).port
  const N = 100_000
  const client = connect(port, '127.0.0.1')
  client.on('error', () => {})
  t.teardown(() => client.destroy())
  client.on('data', () => {})
  client.write('GET /r HTTP/1.1\r\nHost: x\r\n\r\n'.repeat(N))

  // Until it settles: as many as one read brought in past the limit, not all 100,000 (4 MB).
  let last = -1
  while (last !== parsed) {
    last = parsed
    await sleep(300)
  }
  t.ok(parsed >= MAX_WAITING, `${parsed} parsed, the queue reached its limit`)
  t.ok(parsed < N / 10, `${parsed} of ${N} parsed while the first answer waits`)

  // Answered, the rest are read and served in turn.
  const settled = parsed
  ;(first as ServerResponse | null)?.end('ok')
  await waitFor(
    () => answered > settled,
    15_000,
    () => `more answers than were first parsed (${answered})`,
  )
  t.pass('reading resumed')
})
