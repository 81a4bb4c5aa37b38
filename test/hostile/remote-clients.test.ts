import { request } from 'node:http'
import { connect } from 'node:net'
import { networkInterfaces } from 'node:os'
import t, { type Test } from 'tap'
import { startInterceptingProxy } from '../helpers/intercepting-proxy.js'

/**
 * Found in review: the injected sidecar listens on every address (the kubelet probes it by the
 * pod's IP), and served anyone who reached it there: another pod wrote as this proxy's tenant,
 * with its upstream credentials, and read through it too. A client that reaches the proxy at a
 * non-loopback address now gets only /healthz and /readyz; the agent's own connections (at
 * 127.0.0.1, or redirected there by the enforce rules) are served as before.
 */
const outside = Object.values(networkInterfaces())
  .flat()
  .find((a) => a && !a.internal && a.family === 'IPv4')?.address

function send(
  host: string,
  port: number,
  method: string,
  path: string,
  headers: Record<string, string> = {},
) {
  return new Promise<{ status: number; body: string }>((resolve, reject) => {
    const req = request({ host, port, method, path, headers: { connection: 'close', ...headers } }, (res) => {
      let body = ''
      res.on('data', (c) => (body += c))
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }))
    })
    req.on('connect', (res, socket) => {
      socket.destroy()
      resolve({ status: res.statusCode ?? 0, body: '' })
    })
    req.on('error', reject)
    req.end(method === 'POST' ? '{"amount":1}' : undefined)
  })
}

/** Whether the TLS port closes a connection before answering anything (it sends a ClientHello-less byte). */
function closedAtOnce(host: string, port: number) {
  return new Promise<boolean>((resolve) => {
    const socket = connect(port, host)
    let answered = false
    socket.on('data', () => (answered = true))
    socket.on('error', () => {})
    socket.on('close', () => resolve(!answered))
    socket.setTimeout(5_000, () => {
      socket.destroy()
      resolve(false)
    })
  })
}

async function proxyOn(t: Test, remoteClients: boolean) {
  // Every address, as the injected sidecar listens.
  const { upstream, bench, tlsPort } = await startInterceptingProxy(t, {
    proxy: { host: '::', remoteClients },
  })
  return { upstream, port: bench.port, tlsPort }
}

t.test('a client that reaches the proxy by a non-loopback address writes nothing through it', async (t) => {
  t.ok(outside, 'this machine has a non-loopback IPv4 address to reach the proxy by')
  if (!outside) return
  const p = await proxyOn(t, false)
  const written = () => p.upstream.received.length

  const own = await send('127.0.0.1', p.port, 'POST', '/sys_billing/v1/checks')
  t.equal(own.status, 200, "the pod's own agent writes")
  t.equal(written(), 1)

  const other = await send(outside, p.port, 'POST', '/sys_billing/v1/checks')
  t.equal(other.status, 403)
  t.match(JSON.parse(other.body), { code: 'remote_client' })
  const read = await send(outside, p.port, 'GET', '/sys_billing/v1/anything')
  t.equal(read.status, 403, 'nor reads through it with its credentials')
  t.equal(written(), 1, 'nothing reached the upstream')

  t.equal((await send(outside, p.port, 'GET', '/healthz')).status, 200, 'the kubelet still probes it')
  const ready = await send(outside, p.port, 'GET', '/readyz')
  t.same([ready.status, JSON.parse(ready.body)], [200, { ready: true }], 'the status, no detail')
  t.equal((await send(outside, p.port, 'CONNECT', `localhost:${p.upstream.port}`)).status, 403, 'no tunnel')
  t.ok(await closedAtOnce(outside, p.tlsPort), 'the TLS port closes it before a byte is read')
  t.equal(
    (await send('127.0.0.1', p.port, 'POST', '/sys_billing/v1/checks')).status,
    200,
    'still serves its own',
  )
})

t.test('proxy.remoteClients serves them, for a proxy shared on purpose', async (t) => {
  t.ok(outside)
  if (!outside) return
  const p = await proxyOn(t, true)
  t.equal((await send(outside, p.port, 'POST', '/sys_billing/v1/checks')).status, 200)
  t.equal(p.upstream.received.length, 1)
})
