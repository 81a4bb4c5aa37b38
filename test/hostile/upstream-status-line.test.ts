import { createServer, type Socket } from 'node:net'
import t, { type Test } from 'tap'
import { startBillingProxy } from '../helpers/billing-proxy.js'
import { agentRequest } from '../helpers/proxy.js'
import { billingSystems } from '../helpers/proxy-fixtures.js'

/** A raw upstream on loopback: each request's bytes are answered by `answer`; closed at teardown. */
async function rawUpstream(t: Test, answer: (socket: Socket) => void): Promise<number> {
  const sockets = new Set<Socket>()
  const raw = createServer((socket) => {
    sockets.add(socket)
    socket.on('error', () => {})
    answer(socket)
  })
  await new Promise<void>((resolve) => raw.listen(0, '127.0.0.1', resolve))
  t.teardown(() => {
    for (const s of sockets) s.destroy()
    raw.close()
  })
  return (raw.address() as { port: number }).port
}

/**
 * Found in review: an upstream whose status line Node's client takes but its server refuses (a
 * code under 100, a control byte in the reason) threw outside any handler, and the process
 * ended: the control plane with it, in the embedded default. The agent gets a 502, the process
 * serves on.
 */
t.test('an upstream status line the agent cannot be sent is refused, and the proxy serves on', async (t) => {
  const lines = ['HTTP/1.1 000 X', 'HTTP/1.1 099 X', 'HTTP/1.1 200 O\x01K', 'HTTP/1.1 200 OK']
  let next = 0
  const port = await rawUpstream(t, (socket) =>
    socket.once('data', () => {
      const line = lines[next++ % lines.length] as string
      socket.end(`${line}\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok`)
    }),
  )
  const bench = await startBillingProxy(t, { systems: () => billingSystems(`http://127.0.0.1:${port}`) })
  const read = () => agentRequest(bench.port, { method: 'GET', path: '/sys_billing/v1/report' })
  for (const code of ['000', '099']) {
    const r = await read()
    t.same([r.status, r.json().code], [502, 'upstream_error'], `status ${code}`)
  }
  const blanked = await read()
  t.same(
    [blanked.status, blanked.body.toString()],
    [200, 'ok'],
    'a control byte in the reason: relayed without it',
  )
  const fine = await read()
  t.same([fine.status, fine.body.toString()], [200, 'ok'], 'and the proxy still serves')
  t.equal((await bench.api.get('/healthz')).status, 200, 'so does the control plane beside it')
})

/**
 * Found in review: bytes past an answer's Content-Length (a server counting characters, not
 * bytes: `Zoë`) arriving with it make Node's client fail the connection after the answer. The
 * proxy then answered the agent 502 into the response it was relaying, and the write after its
 * end was an unhandled error that ended the process. The agent now gets the answer the
 * upstream gave, and the process serves on.
 */
t.test('an upstream answer with bytes past its length: relayed, and the proxy serves on', async (t) => {
  let extra = true
  const port = await rawUpstream(t, (socket) =>
    socket.on('data', () => {
      // One write: the extra bytes arrive with the headers.
      socket.write(`HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok${extra ? '-EXTRA-BYTES' : ''}`)
    }),
  )
  const bench = await startBillingProxy(t, { systems: () => billingSystems(`http://127.0.0.1:${port}`) })
  const write = () =>
    agentRequest(bench.port, { method: 'POST', path: '/sys_billing/v1/verify', body: '{"name":"Zoë"}' })
  for (const what of ['an ALLOWed write', 'and again']) {
    const r = await write()
    t.same([r.status, r.body.toString()], [200, 'ok'], `${what}: the upstream's answer, as it gave it`)
  }
  const read = await agentRequest(bench.port, { method: 'GET', path: '/sys_billing/v1/report' })
  t.same([read.status, read.body.toString()], [200, 'ok'], 'an ungated read too')
  extra = false
  t.same((await write()).status, 200, 'the proxy still serves')
  t.equal((await bench.api.get('/healthz')).status, 200, 'so does the control plane beside it')
})
