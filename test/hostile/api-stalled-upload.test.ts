import { once } from 'node:events'
import { connect } from 'node:net'
import t from 'tap'
import { startControlPlane } from '../helpers/control-plane.js'

/**
 * An upload that stalls mid-body on the API port: the whole request has 5 minutes, as on
 * gate-proxy, and shutdown cuts it after a short grace instead of waiting for the client.
 */
t.test('a stalled upload holds neither the API port past its time limit nor shutdown', async (t) => {
  const { cp } = await startControlPlane(t, 'fake', {
    settings: { server: { port: 0, host: '127.0.0.1' } },
  })
  const port = Number(new URL(await cp.listen()).port)
  t.equal(cp.app.server.requestTimeout, 300_000, 'a whole request within 5 minutes')
  const socket = connect(port, '127.0.0.1')
  socket.on('error', () => {})
  await once(socket, 'connect')
  socket.write(
    'POST /v1/check HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{"verb":',
  )
  // Answered at once (no key), the connection stays open, waiting for the rest of the body.
  await once(socket, 'data')
  const closed = once(socket, 'close')
  // Without the grace, close() waited for this client for as long as it kept the socket open.
  await cp.close()
  await closed
  t.ok(socket.destroyed, 'the stalled connection was cut')
})
