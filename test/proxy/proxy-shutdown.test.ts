import { request } from 'node:http'
import { createServer, type Socket } from 'node:net'
import t from 'tap'
import { startBillingProxy } from '../helpers/billing-proxy.js'
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
