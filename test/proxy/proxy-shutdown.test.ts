import { request } from 'node:http'
import { createServer, connect as netConnect, type Socket } from 'node:net'
import { connect as tlsConnect } from 'node:tls'
import t from 'tap'
import { startBillingProxy } from '../helpers/billing-proxy.js'
import { startInterceptingProxy } from '../helpers/intercepting-proxy.js'
import { agentRequest } from '../helpers/proxy.js'
import { waitFor } from '../helpers/wait.js'

/**
 * In the single-process default the control plane waits for the proxy to close before it shuts
 * down, so close() must not wait on a request that a slow upstream holds open (the upstream
 * timeout here is two minutes) or on an open CONNECT tunnel. The test's own timeout is the limit.
 */
t.test('close() does not wait for in-flight requests or tunnels', { timeout: 30_000 }, async (t) => {
  // A TCP server the pass-through list lets a tunnel reach; it holds every connection open.
  const held: Socket[] = []
  const tcp = createServer((s) => held.push(s))
  await new Promise<void>((r) => tcp.listen(0, '127.0.0.1', () => r()))
  const tcpPort = (tcp.address() as { port: number }).port
  t.teardown(() => {
    for (const s of held) s.destroy()
    tcp.close()
  })
  const { upstream, proxy } = await startBillingProxy(t, {
    proxy: { upstreamTimeoutMs: 120_000, passthrough: [`127.0.0.1:${tcpPort}`] },
  })
  upstream.behaviour = () => {} // never answers

  const inFlight = agentRequest(proxy.port, {
    method: 'POST',
    path: '/sys_billing/v1/verify',
    body: '{}',
  }).then(
    (r) => r.status,
    (err: Error) => err.message,
  )
  await waitFor(() => upstream.received.length > 0, 15_000, 'the request to reach the upstream')
  t.equal(upstream.received.length, 1, 'the request is with the upstream, which does not answer')
  const tunnel = await new Promise<Socket>((resolve, reject) => {
    const req = request({
      host: '127.0.0.1',
      port: proxy.port,
      method: 'CONNECT',
      path: `127.0.0.1:${tcpPort}`,
    })
    req.on('connect', (res, socket) =>
      res.statusCode === 200 ? resolve(socket) : reject(new Error('refused')),
    )
    req.on('error', reject)
    req.end()
  })
  const tunnelClosed = new Promise<void>((r) => tunnel.once('close', () => r()))
  tunnel.on('error', () => {})

  await proxy.close()
  t.pass('close() resolved')
  t.not(await inFlight, 200, 'the in-flight request was cut, not answered')
  await tunnelClosed
  t.pass('the tunnel was closed')
})

t.test(
  'a TLS connection still handshaking when close() resolves is not served (found in review)',
  async (t) => {
    const { upstream, ca, bench } = await startInterceptingProxy(t)
    const proxy = bench.proxy
    // A relay that holds the proxy's answer to the ClientHello until told: the handshake is under
    // way, not done, when the proxy closes.
    let release: () => void = () => {}
    const released = new Promise<void>((r) => {
      release = r
    })
    let helloAnswered: () => void = () => {}
    const answered = new Promise<void>((r) => {
      helloAnswered = r
    })
    const relay = createServer((client) => {
      const toProxy = netConnect(proxy.tlsPort as number, '127.0.0.1')
      for (const s of [client, toProxy]) s.on('error', () => {})
      client.on('close', () => toProxy.destroy())
      toProxy.on('close', () => client.destroy())
      client.on('data', (d) => toProxy.write(d))
      toProxy.on('data', (d) => {
        helloAnswered()
        released.then(() => client.write(d))
      })
    })
    await new Promise<void>((r) => relay.listen(0, '127.0.0.1', () => r()))
    t.teardown(() => relay.close())
    const port = (relay.address() as { port: number }).port
    const outcome = new Promise<string>((resolve) => {
      const s = tlsConnect({ host: '127.0.0.1', port, servername: 'localhost', ca: ca.certPem }, () => {
        s.write(`POST /v1/checks HTTP/1.1\r\nHost: localhost:${upstream.port}\r\ncontent-length: 2\r\n\r\n{}`)
      })
      let got = ''
      s.on('data', (d) => (got += d))
      s.on('error', () => resolve(got || 'refused'))
      s.on('close', () => resolve(got || 'closed'))
      setTimeout(() => resolve(got || 'open'), 15_000).unref()
    })
    await answered
    await proxy.close()
    release()
    t.match(await outcome, /^(closed|refused)$/, 'cut, unanswered')
    t.equal(upstream.received.length, 0, 'nothing was forwarded')
  },
)
