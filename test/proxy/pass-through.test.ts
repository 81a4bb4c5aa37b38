import { createHash, randomBytes } from 'node:crypto'
import { request } from 'node:http'
import t from 'tap'
import { startFleet } from '../helpers/fleet.js'
import { agentRequest, agentRequestExpectingContinue } from '../helpers/proxy.js'
import { waitFor } from '../helpers/wait.js'

/** Guarantee 5: an ALLOWed write passes through faithfully, with real Redis, Postgres and upstream. */
t.test('pass-through correctness', async (t) => {
  // 1 s of upstream silence: short enough to test, long enough that a 24 MiB body hashed in this
  // same process on a loaded machine never looks like a silent upstream.
  const fleet = await startFleet(t, { proxies: 1, upstreamTimeoutMs: 1000 })
  const port = fleet.proxies[0]!.port
  const up = fleet.upstream
  const defaultBehaviour = up.behaviour
  t.afterEach(() => {
    up.behaviour = defaultBehaviour
  })

  t.test('a chunked request body streams through intact', async (t) => {
    const parts = Array.from({ length: 20 }, () => randomBytes(64 * 1024))
    const expected = createHash('sha256').update(Buffer.concat(parts)).digest('hex')
    const status = await new Promise<number>((resolve, reject) => {
      const req = request(
        {
          host: '127.0.0.1',
          port,
          method: 'PUT',
          path: '/sys_billing/v1/upload/chunked',
          headers: { 'transfer-encoding': 'chunked' },
        },
        (res) => {
          res.resume()
          res.on('end', () => resolve(res.statusCode ?? 0))
        },
      )
      req.on('error', reject)
      let i = 0
      const next = () => {
        if (i === parts.length) return req.end()
        req.write(parts[i++], () => setImmediate(next))
      }
      next()
    })
    t.equal(status, 200)
    const got = up.received.at(-1)
    t.equal(got?.headers['transfer-encoding'], 'chunked')
    t.equal(got?.bodySha256, expected)
  })

  t.test('a large body (24 MiB) goes through byte for byte', async (t) => {
    const body = randomBytes(24 * 1024 * 1024)
    const r = await agentRequest(port, {
      method: 'PUT',
      path: '/sys_billing/v1/upload/large',
      headers: { 'content-type': 'application/octet-stream', 'content-length': String(body.length) },
      body,
    })
    t.equal(r.status, 200)
    t.equal(up.received.at(-1)?.bodySha256, createHash('sha256').update(body).digest('hex'))
    t.equal(up.received.at(-1)?.headers['content-length'], String(body.length))
  })

  t.test('a streaming response reaches the agent as it is produced', async (t) => {
    let clientSaw: (() => void) | undefined
    const sawFirst = new Promise<void>((r) => {
      clientSaw = r
    })
    up.behaviour = async (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' })
      res.write('first;')
      // The second chunk is only written once the agent has received the first: a proxy that
      // buffered the response would never deliver it, and this test would fail.
      await Promise.race([
        sawFirst,
        new Promise((_, reject) => setTimeout(() => reject(new Error('response was buffered')), 5000)),
      ])
      res.end('second')
    }
    const text = await new Promise<string>((resolve, reject) => {
      const req = request(
        { host: '127.0.0.1', port, method: 'POST', path: '/sys_billing/v1/stream' },
        (res) => {
          let acc = ''
          res.on('data', (c: Buffer) => {
            acc += c.toString()
            if (acc.includes('first;')) clientSaw?.()
          })
          res.on('end', () => resolve(acc))
          res.on('error', reject)
        },
      )
      req.on('error', reject)
      req.end('{}')
    })
    t.equal(text, 'first;second')
  })

  t.test('upstream errors pass through as the upstream sent them', async (t) => {
    up.behaviour = (_req, res) => {
      res.writeHead(500, { 'content-type': 'application/json', 'x-upstream': 'yes' })
      res.end('{"error":"boom"}')
    }
    const r = await agentRequest(port, { method: 'POST', path: '/sys_billing/v1/verify', body: '{}' })
    t.equal(r.status, 500)
    t.equal(r.body.toString(), '{"error":"boom"}')
    t.equal(r.headers['x-upstream'], 'yes')
    t.match(r.headers['x-writegate-receipt'], /^rcp_/, 'the decision was still receipted')
  })

  t.test('an upstream that does not answer in time gives 504', async (t) => {
    up.behaviour = () => {}
    const r = await agentRequest(port, { method: 'POST', path: '/sys_billing/v1/verify', body: '{}' })
    t.equal(r.status, 504)
    t.match(r.json(), { code: 'upstream_timeout', receiptId: /^rcp_/ })
  })

  t.test('an upstream that switches protocols unasked gives 502, not an agent left waiting', async (t) => {
    // The timeout (1 s here) cannot catch it: Node hands a 101's socket over, unwatched.
    up.behaviour = (_req, res) => {
      res.socket?.write('HTTP/1.1 101 Switching Protocols\r\nupgrade: raw\r\nconnection: upgrade\r\n\r\nRAW')
    }
    const r = await agentRequest(port, { method: 'POST', path: '/sys_billing/v1/verify', body: '{}' })
    t.equal(r.status, 502)
    t.match(r.json(), { code: 'upstream_error', receiptId: /^rcp_/ })
    up.behaviour = defaultBehaviour
    const after = await agentRequest(port, { method: 'POST', path: '/sys_billing/v1/verify', body: '{}' })
    t.equal(after.status, 200, 'the proxy goes on serving')
  })

  /** Reads a response to the end or to its cut: its status, whether it completed, its bytes. */
  const readAll = (path: string) =>
    new Promise<{ status: number; complete: boolean; body: string }>((resolve, reject) => {
      const req = request({ host: '127.0.0.1', port, method: 'POST', path }, (res) => {
        let body = ''
        res.setEncoding('utf8')
        res.on('data', (c: string) => {
          body += c
        })
        res.on('error', () => {}) // a cut response also reports 'aborted'
        res.on('close', () => resolve({ status: res.statusCode ?? 0, complete: res.complete, body }))
      })
      req.on('error', reject)
      req.end('{}')
    })

  t.test('an upstream whose body stalls past the timeout is cut off, not left hanging', async (t) => {
    up.behaviour = (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' })
      res.write('partial')
    }
    const r = await readAll('/sys_billing/v1/verify')
    t.equal(r.status, 200)
    t.equal(r.complete, false, 'the agent sees the response end short')
    t.equal(r.body, 'partial')
  })

  t.test('a body that keeps coming is not cut, however long it takes in all', async (t) => {
    // Twelve chunks 150 ms apart: 1.8 s in all, past the 1 s timeout, each gap far from it (a
    // timer on a loaded machine, in the proxy's own process, may fire late).
    const chunks = 'abcdefghijkl'
    up.behaviour = (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' })
      let n = 0
      const tick = setInterval(() => {
        res.write(chunks[n])
        if (++n === chunks.length) {
          clearInterval(tick)
          res.end()
        }
      }, 150)
    }
    const r = await readAll('/sys_billing/v1/verify')
    t.same(r, { status: 200, complete: true, body: chunks })
  })

  t.test('a client that aborts mid-upload leaves the proxy healthy', async (t) => {
    const before = up.received.length
    const arrived = up.arrivals
    await new Promise<void>((resolve) => {
      const req = request({
        host: '127.0.0.1',
        port,
        method: 'PUT',
        path: '/sys_billing/v1/upload/aborted',
        headers: { 'content-length': String(10 * 1024 * 1024) },
      })
      req.on('error', () => resolve())
      // Hung up once the upload reaches the upstream (a fixed delay could fire while it is decided).
      req.write(randomBytes(256 * 1024), () =>
        // Hung up either way; had it never arrived, the wait below says so.
        waitFor(() => up.arrivals > arrived, 15_000, 'the upload at the upstream').then(
          () => req.destroy(),
          () => req.destroy(),
        ),
      )
    })
    await waitFor(() => up.received.length > before, 15_000, 'the cut upload recorded by the upstream')
    const aborted = up.received.slice(before).find((x) => x.url === '/v1/upload/aborted')
    t.ok(aborted && !aborted.complete, 'the upstream saw the request cut short, not a complete one')
    t.equal(
      (await agentRequest(port, { method: 'POST', path: '/sys_billing/v1/verify', body: '{}' })).status,
      200,
      'the next request is served',
    )
  })

  t.test('hop-by-hop headers are not forwarded, in either direction', async (t) => {
    up.behaviour = (_req, res) => {
      res.writeHead(200, {
        connection: 'x-upstream-hop',
        'x-upstream-hop': 'secret',
        'keep-alive': 'timeout=5',
        'content-type': 'text/plain',
      })
      res.end('ok')
    }
    const r = await agentRequest(port, {
      method: 'POST',
      path: '/sys_billing/v1/verify',
      headers: {
        connection: 'x-agent-hop',
        'x-agent-hop': '1',
        'keep-alive': 'timeout=9',
        te: 'trailers',
        'proxy-authorization': 'Basic eDp5',
        trailer: 'x-t',
        'x-normal': 'kept',
      },
      body: '{}',
    })
    t.equal(r.status, 200)
    const h = up.received.at(-1)?.headers ?? {}
    for (const name of ['x-agent-hop', 'keep-alive', 'te', 'proxy-authorization', 'trailer'])
      t.equal(h[name], undefined, `${name} not sent upstream`)
    t.equal(h['x-normal'], 'kept')
    t.equal(
      r.headers['x-upstream-hop'],
      undefined,
      'a header the upstream named in Connection does not reach the agent',
    )
    t.equal(r.headers['keep-alive'], undefined)
  })

  t.test(
    'a write sent with Expect: 100-continue goes out with the injected credential and its receipt',
    async (t) => {
      // http-proxy skips its 'proxyReq' event for such a request: nothing may depend on it.
      const r = await agentRequest(port, {
        method: 'POST',
        path: '/sys_billing/v1/verify',
        headers: {
          'content-type': 'application/json',
          expect: '100-continue',
          authorization: 'Bearer agent-own',
        },
        body: '{"a":1}',
      })
      t.equal(r.status, 200)
      t.match(r.headers['x-writegate-receipt'], /^rcp_/)
      const got = up.received.at(-1)
      t.equal(got?.headers.authorization, 'Bearer up-secret', 'the injected credential, not the agent one')
      t.equal(got?.headers['x-writegate-receipt'], r.headers['x-writegate-receipt'])
      t.equal(got?.body.toString(), '{"a":1}')
      t.equal(got?.headers.expect, undefined, 'the expectation was the proxy to meet, not passed on')
    },
  )

  t.test(
    'Expect: 100-continue is answered once the write is allowed, and the body then goes upstream',
    async (t) => {
      const before = up.received.length
      const r = await agentRequestExpectingContinue(port, '/sys_billing/v1/verify', '{"held":true}')
      t.match(r, { status: 200, continued: true, sentBody: true })
      t.equal(up.received.length, before + 1)
      t.equal(up.received.at(-1)?.body.toString(), '{"held":true}')
    },
  )

  t.test('a write refused before its body is wanted gets no 100 Continue and never uploads it', async (t) => {
    const before = up.received.length
    const r = await agentRequestExpectingContinue(port, '/sys_billing/v1/not-a-route', '{"held":true}')
    t.match(r, { status: 403, continued: false, sentBody: false })
    t.equal(up.received.length, before, 'the upstream was not contacted')
  })
})
