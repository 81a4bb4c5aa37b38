import { webcrypto } from 'node:crypto'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { createServer, type Server } from 'node:https'
import type { AddressInfo } from 'node:net'
import type { Test } from 'tap'
import { createInterceptionCa, loadInterceptionCa, pemOfKey } from '../../src/tls/interception-ca.js'

export interface HttpsUpstream {
  origin: string
  port: number
  /** The CA its certificate chains to (what a system's caBundle names). */
  caPem: string
  received: {
    method: string
    url: string
    headers: Record<string, string | string[] | undefined>
    body: string
  }[]
  /** How it answers (default: 200 `{"ok":true}`); replaceable. */
  answer: (req: IncomingMessage, res: ServerResponse) => void
}

/** A real HTTPS server on 127.0.0.1 (as `localhost`) with a certificate from a CA of its own. */
export async function startHttpsUpstream(t: Test): Promise<HttpsUpstream> {
  const made = await createInterceptionCa({ hosts: ['localhost'], days: 1, name: 'test upstream CA' })
  const ca = await loadInterceptionCa(made.certPem, made.keyPem)
  const keys = (await webcrypto.subtle.generateKey({ name: 'ECDSA', namedCurve: 'P-256' }, true, [
    'sign',
    'verify',
  ])) as webcrypto.CryptoKeyPair
  const cert = await ca.issueLeaf('localhost', keys, 3600)
  const received: HttpsUpstream['received'] = []
  const upstream = {
    answer: (_req: IncomingMessage, res: ServerResponse) => {
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}')
    },
  }
  const server: Server = createServer(
    { key: await pemOfKey(keys.privateKey), cert: `${cert.trimEnd()}\n${made.certPem}` },
    (req, res) => {
      let body = ''
      req.on('data', (c) => (body += c))
      req.on('end', () => {
        received.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body })
        upstream.answer(req, res)
      })
    },
  )
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => {
    server.closeAllConnections()
    return new Promise((resolve) => server.close(resolve))
  })
  const port = (server.address() as AddressInfo).port
  return Object.assign(upstream, { origin: `https://localhost:${port}`, port, caPem: made.certPem, received })
}
