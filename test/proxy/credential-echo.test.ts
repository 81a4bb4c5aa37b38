import type { ServerResponse } from 'node:http'
import { connect } from 'node:net'
import { gzipSync } from 'node:zlib'
import t from 'tap'
import { startFleet } from '../helpers/fleet.js'
import { agentRequest, capturingLogger, LOG_LEVEL } from '../helpers/proxy.js'
import { sleep } from '../helpers/wait.js'

/** What the fleet's proxies inject for sys_billing (test/helpers/fleet.ts): `Bearer up-secret`. */
const SECRET = 'up-secret'

/** Every byte the proxy sends back to one raw request, until it closes the connection. */
function rawExchange(port: number, request: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(request))
    const chunks: Buffer[] = []
    socket.on('data', (c) => chunks.push(c))
    socket.on('error', reject)
    socket.on('close', () => resolve(Buffer.concat(chunks).toString('latin1')))
  })
}

const post = (path: string, extra = '') =>
  `POST /sys_billing${path} HTTP/1.1\r\nhost: proxy\r\ncontent-type: application/json\r\ncontent-length: 2\r\nconnection: close\r\n${extra}\r\n{}`

/**
 * The agent never holds the credential the proxy injects. An upstream that echoes it back (an
 * endpoint that returns the request's headers, an error that quotes the token) would hand it
 * over: such an answer is withheld, or cut once its headers are out, and nothing of the secret
 * reaches the agent.
 */
t.test('an answer that carries back the injected credential never reaches the agent', async (t) => {
  const { logger, lines } = capturingLogger()
  const fleet = await startFleet(t, { proxies: 1, logger })
  const port = fleet.proxies[0]?.port as number

  t.test('the secret in a body, after the headers went out: the connection is cut', async (t) => {
    fleet.upstream.behaviour = async (req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' })
      res.write('{"echo":{"headers":')
      await sleep(20)
      res.end(`${JSON.stringify(req.headers)}}}`)
    }
    const got = await rawExchange(port, post('/v1/verify'))
    t.match(got, /^HTTP\/1\.1 200/, 'the status and headers were relayed')
    t.match(got, /x-writegate-receipt: rcp_/)
    t.match(got, /\{"echo":\{"headers":/, 'and the body up to the echo')
    t.notOk(got.includes(SECRET), 'not the secret')
    t.equal(
      fleet.upstream.received.at(-1)?.headers.authorization,
      `Bearer ${SECRET}`,
      'which the upstream got',
    )
  })

  t.test('in the first chunk of the body, nothing was written yet: answered 502 instead', async (t) => {
    fleet.upstream.behaviour = (req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'x-kept': 'no' })
      res.end(JSON.stringify({ headers: req.headers }))
    }
    const r = await agentRequest(port, { method: 'POST', path: '/sys_billing/v1/verify', body: '{}' })
    t.equal(r.status, 502)
    t.match(r.json(), { code: 'answer_withheld', reason: 'credential_echoed', receiptId: /^rcp_/ })
    t.equal(r.headers['x-kept'], undefined, "none of the upstream's headers")
    t.ok(r.headers.date, 'but a Date of its own')
  })

  t.test('split across two chunks: cut at the first, with less than half of it sent', async (t) => {
    fleet.upstream.behaviour = async (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' })
      res.write('{"token":"Bearer up-se')
      await sleep(50)
      res.end('cret"}')
    }
    const got = await rawExchange(port, post('/v1/verify'))
    t.match(got, /^HTTP\/1\.1 502 Bad Gateway\r\n/, 'the first chunk ended with half of it: not relayed')
    t.notOk(got.includes('up-se'), 'half of the secret is not relayed either')
  })

  t.test("in the status line's reason text", async (t) => {
    fleet.upstream.behaviour = (req, res) => {
      res.writeHead(401, `invalid token ${req.headers.authorization}`)
      res.end()
    }
    const got = await rawExchange(port, post('/v1/verify'))
    t.match(got, /^HTTP\/1\.1 502 Bad Gateway\r\n/)
    t.match(got, /"reason":"credential_echoed"/)
    t.notOk(got.includes(SECRET))
  })

  t.test('the secret in a header: answered 502 answer_withheld instead', async (t) => {
    fleet.upstream.behaviour = (req, res) => {
      res.writeHead(401, { 'x-echo-authorization': String(req.headers.authorization) })
      res.end('{}')
    }
    const r = await agentRequest(port, { method: 'POST', path: '/sys_billing/v1/verify', body: '{}' })
    t.equal(r.status, 502)
    t.match(r.json(), { code: 'answer_withheld', reason: 'credential_echoed', receiptId: /^rcp_/ })
    t.notOk(JSON.stringify(r.headers).includes(SECRET) || r.body.toString().includes(SECRET))
  })

  t.test("in a header's name: withheld, and the name is not logged (found in review)", async (t) => {
    fleet.upstream.behaviour = (req, res) => {
      const token = String(req.headers.authorization).replace(/^Bearer /, '')
      res.writeHead(200, { [`x-seen-${token}`]: '1' })
      res.end('{}')
    }
    const r = await agentRequest(port, { method: 'POST', path: '/sys_billing/v1/verify', body: '{}' })
    t.equal(r.status, 502)
    t.match(r.json(), { code: 'answer_withheld', reason: 'credential_echoed' })
    t.ok(
      lines.some((l) => l.header === "(a header's name)"),
      'the warning says where, not what',
    )
    t.notOk(JSON.stringify(lines).includes(SECRET), 'the secret is in no log line')
  })

  t.test('percent-encoded in a redirect, on an ungated read', async (t) => {
    fleet.upstream.behaviour = (_req, res) => {
      res.writeHead(302, {
        location: `https://elsewhere.example/cb?t=${encodeURIComponent(`Bearer ${SECRET}`)}`,
      })
      res.end()
    }
    const r = await agentRequest(port, { method: 'GET', path: '/sys_billing/v1/anything' })
    t.equal(r.status, 502)
    t.match(r.json(), { code: 'answer_withheld', reason: 'credential_echoed' })
    t.notOk(JSON.stringify(r.headers).includes('up-secret'))
  })

  t.test(
    'a compressed answer cannot be searched: asked for identity, withheld if it comes anyway',
    async (t) => {
      /** An upstream that gzips its echo under this coding header, though asked for identity. */
      const gzipped = (coding: Record<string, string>) => (_req: unknown, res: ServerResponse) => {
        res.writeHead(200, { 'content-type': 'application/json', ...coding })
        res.end(gzipSync(`{"token":"Bearer ${SECRET}"}`))
      }
      const verify = (headers: Record<string, string> = {}) =>
        agentRequest(port, { method: 'POST', path: '/sys_billing/v1/verify', headers, body: '{}' })
      fleet.upstream.behaviour = gzipped({ 'content-encoding': 'gzip' })
      const r = await verify({ 'accept-encoding': 'gzip, br' })
      t.equal(
        fleet.upstream.received.at(-1)?.headers['accept-encoding'],
        'identity',
        'the agent asked for gzip',
      )
      t.equal(r.status, 502)
      t.match(r.json(), { code: 'answer_withheld', reason: 'answer_compressed' })
      // A compressed answer without a body is harmless, and relayed.
      fleet.upstream.behaviour = (_req, res) => {
        res.writeHead(204, { 'content-encoding': 'gzip' })
        res.end()
      }
      t.equal((await verify()).status, 204)
      // Node undoes chunked framing only: a gzip transfer coding would reach the agent gzipped.
      fleet.upstream.behaviour = gzipped({ 'transfer-encoding': 'gzip, chunked' })
      const transferred = await verify()
      t.equal(transferred.status, 502)
      t.match(transferred.json(), { code: 'answer_withheld', reason: 'answer_compressed' })
    },
  )

  t.test('an answer without the secret is relayed byte for byte', async (t) => {
    const body = `{"ok":true,"note":"up-secre is not it; nor is ${'x'.repeat(70_000)}"}`
    fleet.upstream.behaviour = (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end(body)
    }
    const r = await agentRequest(port, { method: 'POST', path: '/sys_billing/v1/verify', body: '{}' })
    t.equal(r.status, 200)
    t.equal(r.body.toString(), body)
  })

  t.test('counted: writegate_fail_closed_total by reason', async (t) => {
    const metrics = await (await fetch(`http://127.0.0.1:${fleet.proxies[0]?.metricsPort}/metrics`)).text()
    const count = (reason: string) =>
      Number(
        new RegExp(
          `^writegate_fail_closed_total\\{reason="${reason}",component="proxy"\\} (\\d+)$`,
          'm',
        ).exec(metrics)?.[1] ?? 0,
      )
    t.ok(count('credential_echoed') >= 5, `${count('credential_echoed')} echoes`)
    t.equal(count('answer_compressed'), 2, 'gzip content, and a gzip transfer coding')
  })

  t.test('on record: a warning naming the system and the header, never the secret', async (t) => {
    const warned = lines.filter((l) => l.level === LOG_LEVEL.warn && /withheld/.test(String(l.msg)))
    t.ok(warned.length >= 7, `${warned.length} warnings`)
    t.ok(warned.some((l) => l.header === 'x-echo-authorization'))
    t.ok(warned.every((l) => l.system === 'sys_billing'))
    t.notOk(JSON.stringify(lines).includes(SECRET))
    t.notOk(
      lines.some((l) => l.level >= LOG_LEVEL.error),
      'nothing logged as an error: the upstream misbehaved, the proxy did not',
    )
  })
})
