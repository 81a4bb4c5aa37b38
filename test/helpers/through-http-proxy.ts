import { once } from 'node:events'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { createProxyServer, type ProxyServer } from 'http-proxy-3'
import type { Test } from 'tap'

/**
 * A real http-proxy server between a front server and an upstream, as gate-proxy uses one: for
 * tests of how a request's body reaches http-proxy (buffered-body.ts, late-body.ts). Resolves
 * with a URL on the front server; everything is closed when the test ends.
 */
export async function throughHttpProxy(
  t: Test,
  upstream: (req: IncomingMessage, res: ServerResponse) => void,
  front: (req: IncomingMessage, res: ServerResponse, proxy: ProxyServer) => void,
): Promise<string> {
  const up = createServer(upstream)
  up.listen(0, '127.0.0.1')
  await once(up, 'listening')
  const proxy = createProxyServer({ target: `http://127.0.0.1:${(up.address() as AddressInfo).port}` })
  const server = createServer((req, res) => front(req, res, proxy))
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  t.teardown(() => {
    proxy.close()
    server.close()
    up.close()
  })
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/w`
}
