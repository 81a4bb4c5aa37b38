import { request } from 'node:http'
import t from 'tap'
import { startControlPlane } from '../helpers/control-plane.js'

interface Head {
  status: number
  headers: Record<string, string | string[] | undefined>
  /** Body bytes received (HEAD must have none). */
  bytes: number
}

/**
 * One request over a real socket; resolves with the status once the headers arrive (the body
 * of a GET is not waited for: a stream never ends). No answer within 5 s counts as none.
 */
function send(
  port: number,
  method: 'HEAD' | 'GET',
  path: string,
  bearer: string,
): Promise<Head | 'no answer'> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        method,
        path,
        headers: { authorization: `Bearer ${bearer}` },
        agent: false,
        timeout: 5000,
      },
      (res) => {
        if (method === 'GET') {
          resolve({ status: res.statusCode ?? 0, headers: res.headers, bytes: 0 })
          req.destroy()
          return
        }
        let bytes = 0
        res.on('data', (c: Buffer) => {
          bytes += c.length
        })
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, bytes }))
      },
    )
    req.on('timeout', () => {
      resolve('no answer')
      req.destroy()
    })
    req.on('error', (err) => {
      if (!req.destroyed || (err as NodeJS.ErrnoException).code !== 'ECONNRESET') reject(err)
    })
    req.end()
  })
}

/**
 * HEAD is GET without the body (RFC 9110 §9.3.2): on every GET route it answers at once, with
 * the status GET would have, and holds nothing open. A stream (Server-Sent Events) included:
 * its headers went out only with a first body chunk, which HEAD never sends, so it never
 * answered and held a socket, a timer and a subscription.
 */
t.test('HEAD answers on every GET route, with the status GET has', async (t) => {
  const { cp, api } = await startControlPlane(t, 'fake', {
    settings: { server: { port: 0, host: '127.0.0.1' } },
  })
  const port = Number(new URL(await cp.listen()).port)
  const o = await api.newTenant()
  // A receipt to name, so its route answers 200 rather than 404.
  const check = await api.post('/v1/check', { verb: 'verify' }, { bearer: o.apiKey })
  const receiptId = check.body.receiptId as string

  const doc = (await api.get('/v1/openapi.json')).body as {
    paths: Record<string, { get?: { security?: Record<string, unknown>[] } }>
  }
  const routes = Object.entries(doc.paths)
    .filter(([, ops]) => ops.get)
    .map(([path, ops]) => ({
      path: path.replace('{receiptId}', receiptId).replace(/\{[^}]+\}/g, 'x'),
      bearer: JSON.stringify(ops.get?.security ?? []).includes('sponsorToken') ? o.sponsorToken : o.apiKey,
    }))
  t.ok(
    routes.some((r) => r.path === '/v1/receipts/stream'),
    'the stream is among them',
  )
  for (const path of ['/healthz', '/readyz', '/v1/openapi.json']) routes.push({ path, bearer: o.apiKey })

  for (const { path, bearer } of routes) {
    const head = await send(port, 'HEAD', path, bearer)
    if (head === 'no answer') {
      t.fail(`HEAD ${path} answers`)
      continue
    }
    const get = await send(port, 'GET', path, bearer)
    t.equal(head.status, get === 'no answer' ? -1 : get.status, `HEAD ${path}: ${head.status}, as GET`)
    t.equal(head.bytes, 0, `HEAD ${path} has no body`)
  }

  const stream = await send(port, 'HEAD', '/v1/receipts/stream', o.apiKey)
  t.match(
    stream,
    { status: 200, headers: { 'content-type': /^text\/event-stream/ } },
    'the stream says what GET serves',
  )
})
