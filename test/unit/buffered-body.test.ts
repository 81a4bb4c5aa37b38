import type { IncomingMessage } from 'node:http'
import t from 'tap'
import { sendReadBody } from '../../src/proxy/buffered-body.js'
import { throughHttpProxy } from '../helpers/through-http-proxy.js'

// The proxy reads a write's body whole before it decides; http-proxy then sends what was read.
// If http-proxy ever took a body other than through the request's own pipe, the upstream would
// get nothing (the request's stream is consumed) and these would fail.
const readAll = async (req: IncomingMessage) => {
  const chunks: Buffer[] = []
  for await (const c of req) chunks.push(c as Buffer)
  return Buffer.concat(chunks)
}

t.test('a body read whole goes upstream byte for byte, through a real http-proxy server', async (t) => {
  const received: { length: string | undefined; body: Buffer }[] = []
  const url = await throughHttpProxy(
    t,
    async (req, res) => {
      received.push({ length: req.headers['content-length'], body: await readAll(req) })
      res.end('ok')
    },
    async (req, res, proxy) => {
      const body = await readAll(req)
      sendReadBody(req, body)
      proxy.web(req, res, (err) => {
        res.statusCode = 502
        res.end(String(err))
      })
    },
  )

  const bodies = [
    Buffer.from('{"amount":42}'),
    Buffer.alloc(0),
    Buffer.from(Array.from({ length: 1_000_000 }, (_, i) => (i * 31) & 0xff)),
  ]
  for (const body of bodies) {
    const r = await fetch(url, { method: 'POST', body, signal: AbortSignal.timeout(10_000) })
    t.equal(r.status, 200, `a ${body.length}-byte body is forwarded`)
    await r.text()
    const got = received.at(-1)
    t.equal(got?.length, String(body.length), 'with its length')
    t.ok(got?.body.equals(body), 'and its exact bytes')
  }
  t.equal(received.length, bodies.length, 'one upstream request per write')
})
