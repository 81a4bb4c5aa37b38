import { once } from 'node:events'
import { readFileSync } from 'node:fs'
import { type Agent, createServer, type IncomingMessage, request, type ServerResponse } from 'node:http'
import { createServer as createTlsServer, type Agent as HttpsAgent, request as tlsRequest } from 'node:https'
import type { AddressInfo, LookupFunction, Socket } from 'node:net'
import t, { type Test } from 'tap'
import { createUpstreamAgent, UPSTREAM_TIMEOUT_CODE } from '../../src/proxy/upstream-agent.js'
import {
  PRIVATE_ADDRESS_CODE,
  PrivateAddressRefused,
  publicOnlyLookup,
} from '../../src/systems/public-address-lookup.js'
import { selfSigned } from '../helpers/self-signed.js'

const SILENCE_MS = 150
const tls = selfSigned('upstream-agent')
const readKey = () => readFileSync(tls.key, 'utf8')

for (const scheme of ['http', 'https'] as const) {
  async function upstream(t: Test, handler: (req: IncomingMessage, res: ServerResponse) => void) {
    const server =
      scheme === 'https' ? createTlsServer({ cert: tls.pem, key: readKey() }, handler) : createServer(handler)
    // Never the one to close an idle connection within a test's deadline: the agent must.
    server.keepAliveTimeout = 60_000
    server.listen(0, '127.0.0.1')
    await once(server, 'listening')
    t.teardown(() => {
      server.closeAllConnections()
      server.close()
    })
    return new URL(`${scheme}://127.0.0.1:${(server.address() as AddressInfo).port}`)
  }

  function send(origin: URL, agent: Agent) {
    return new Promise<{ status: number; socket: Socket }>((resolve, reject) => {
      const opts = { host: origin.hostname, port: origin.port, path: '/', method: 'POST', agent, ca: tls.pem }
      const req = (scheme === 'https' ? tlsRequest : request)(opts, (res) => {
        res.resume()
        res.on('end', () => resolve({ status: res.statusCode ?? 0, socket: req.socket as Socket }))
      })
      req.on('error', reject)
      req.end('{}')
    })
  }

  t.test(
    `${scheme}: names resolve through the agent's lookup; a publicOnly one refuses a private answer`,
    async (t) => {
      const listening = await upstream(t, (_req, res) => res.end('ok'))
      // By name (the certificate is for localhost), resolved by the test's resolver.
      const origin = new URL(`${scheme}://localhost:${listening.port}`)
      const asked: string[] = []
      const lookup: LookupFunction = (hostname, options, callback) => {
        asked.push(hostname)
        if (options.all) callback(null, [{ address: '127.0.0.1', family: 4 }])
        else callback(null, '127.0.0.1', 4)
      }
      const any = createUpstreamAgent(origin, 60_000, undefined, lookup)
      t.teardown(() => any.destroy())
      t.equal((await send(origin, any)).status, 200, 'connected through the lookup given')
      t.same(asked, ['localhost'])
      const held = createUpstreamAgent(origin, 60_000, undefined, publicOnlyLookup(lookup))
      t.teardown(() => held.destroy())
      const err = await send(origin, held).then(
        () => null,
        (e: NodeJS.ErrnoException) => e,
      )
      t.equal(err?.code, PRIVATE_ADDRESS_CODE, 'refused before connecting')
      t.ok(err instanceof PrivateAddressRefused, 'the error the proxy maps to upstream_address_refused')
    },
  )

  t.test(`${scheme}: an upstream that stays silent fails the request with UPSTREAM_TIMEOUT`, async (t) => {
    const origin = await upstream(t, () => {}) // never answers
    const agent = createUpstreamAgent(origin, SILENCE_MS)
    t.teardown(() => agent.destroy())
    const err = await send(origin, agent).then(
      () => null,
      (e: NodeJS.ErrnoException) => e,
    )
    t.equal(err?.code, UPSTREAM_TIMEOUT_CODE)
  })

  t.test(`${scheme}: a connection is reused, and its timer armed once, not once per request`, async (t) => {
    const origin = await upstream(t, (_req, res) => res.end('ok'))
    const agent = createUpstreamAgent(origin, 60_000)
    t.teardown(() => agent.destroy())
    const first = await send(origin, agent)
    const socket = first.socket
    let rearmed = 0
    const setTimeout = socket.setTimeout.bind(socket)
    socket.setTimeout = (...args: Parameters<Socket['setTimeout']>) => {
      rearmed++
      return setTimeout(...args)
    }
    for (let i = 0; i < 10; i++) {
      const r = await send(origin, agent)
      t.equal(r.socket, socket, 'the same keep-alive connection')
    }
    t.equal(rearmed, 0, 'no request re-armed or cleared the timer')
    t.equal(socket.timeout, 60_000, 'the socket keeps its silence timeout between requests')
  })

  t.test(`${scheme}: a connection idle in the pool past the timeout is closed`, async (t) => {
    const origin = await upstream(t, (_req, res) => res.end('ok'))
    const agent = createUpstreamAgent(origin, SILENCE_MS)
    t.teardown(() => agent.destroy())
    const { status, socket } = await send(origin, agent)
    t.equal(status, 200)
    // Its close, however late a loaded machine fires the timer: the deadline only bounds a hang.
    const closed = await Promise.race([
      // A listener, not once(): the agent destroys it with an error, which once() would throw.
      new Promise<true>((r) => socket.once('close', () => r(true))),
      new Promise<false>((r) => setTimeout(() => r(false), 15_000).unref()),
    ])
    t.ok(closed && socket.destroyed, 'closed while idle')
    t.same(Object.keys(agent.freeSockets), [], 'and gone from the pool')
    t.equal((await send(origin, agent)).status, 200, 'the next request opens a new one')
  })
}

t.test(
  "https: a system's caBundle verifies the upstream, parsed once and kept out of the pool key",
  async (t) => {
    const server = createTlsServer({ cert: tls.pem, key: readKey() }, (_req, res) => res.end('ok'))
    server.listen(0, '127.0.0.1')
    await once(server, 'listening')
    t.teardown(() => {
      server.closeAllConnections()
      server.close()
    })
    const origin = new URL(`https://127.0.0.1:${(server.address() as AddressInfo).port}`)
    const post = (agent: Agent, servername?: string) =>
      new Promise<number>((resolve, reject) => {
        // No per-request `ca`: only the agent's bundle can make this certificate trusted.
        const req = tlsRequest(
          {
            host: origin.hostname,
            port: origin.port,
            path: '/',
            method: 'POST',
            agent,
            ...(servername ? { servername } : {}),
          },
          (res) => {
            res.resume()
            res.on('end', () => resolve(res.statusCode ?? 0))
          },
        )
        req.on('error', reject)
        req.end('{}')
      })

    const errorOf = (p: Promise<unknown>) =>
      p.then(
        () => null,
        (e: NodeJS.ErrnoException) => e,
      )

    const trusting = createUpstreamAgent(origin, 60_000, tls.pem)
    t.teardown(() => trusting.destroy())
    t.equal(await post(trusting), 200, 'the bundle that issued the certificate verifies it')
    const key = trusting.getName({
      host: origin.hostname,
      port: Number(origin.port),
      ...(trusting as HttpsAgent).options,
    })
    t.notMatch(key, /BEGIN CERTIFICATE/, "the bundle's text is not part of the pool key")
    t.ok(key.length < 200, `a short pool key (${key.length} characters)`)

    const other = selfSigned('another-upstream')
    const distrusting = createUpstreamAgent(origin, 60_000, other.pem)
    t.teardown(() => distrusting.destroy())
    const refused = await errorOf(post(distrusting))
    t.match(
      refused?.code,
      /SELF_SIGNED|UNABLE_TO_VERIFY|UNABLE_TO_GET_ISSUER/,
      'another bundle does not verify it: no fallback to trusting it',
    )

    const storeOnly = createUpstreamAgent(origin, 60_000)
    t.teardown(() => storeOnly.destroy())
    const unknown = await errorOf(post(storeOnly))
    t.match(
      unknown?.code,
      /SELF_SIGNED|UNABLE_TO_VERIFY|UNABLE_TO_GET_ISSUER/,
      'without a bundle, only the trust store is trusted',
    )

    // With a bundle, the host name is still checked against the certificate.
    const misnamed = await errorOf(post(trusting, 'not-this-upstream.example'))
    t.equal(misnamed?.code, 'ERR_TLS_CERT_ALTNAME_INVALID', 'a certificate for another name is refused')
  },
)
