import { once } from 'node:events'
import { createServer, type Socket } from 'node:net'
import t, { type Test } from 'tap'
import { startMetricsServer } from '../../src/observability/metrics-server.js'
import { startControlPlane } from '../helpers/control-plane.js'
import {
  eachShape,
  get,
  idleSockets,
  open,
  post,
  type Target,
  watchUnhandled,
} from '../helpers/hostile-client.js'
import { capturingLogger, LOG_LEVEL, startEmbeddedProxy, waitReady } from '../helpers/proxy.js'
import { BILLING_CREDENTIALS, billingSystems, enrolSystems } from '../helpers/proxy-fixtures.js'
import { RecordingUpstream } from '../helpers/upstream.js'

/**
 * The single-process default (`writegate start` without Redis) serves three ports from one
 * process: the API, gate-proxy over the in-memory hot store, and metrics. No client behaviour
 * may crash that process or wedge a port: after every hostile shape, every port still serves,
 * and nothing was left unhandled (the servers run in this process, watched).
 */
t.test('hostile clients on the single-process ports', async (t) => {
  const unhandled = watchUnhandled(t)
  const { logger, lines } = capturingLogger()

  const upstream = await new RecordingUpstream().start()
  t.teardown(() => upstream.close())
  upstream.behaviour = async (req, res) => {
    if (req.url !== '/slow') {
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end('{"ok":true}')
      return
    }
    // A read whose answer streams for a while, to reset the agent in the middle of it.
    res.writeHead(200, { 'content-type': 'text/plain' })
    for (let i = 0; i < 20 && !res.destroyed; i++) {
      res.write(`${'x'.repeat(1024)}\n`)
      await new Promise((r) => setTimeout(r, 10))
    }
    res.end()
  }

  // A pass-through host for CONNECT: echoes, or resets when told to.
  const tunnelEnd = createServer((socket: Socket) => {
    socket.on('error', () => {})
    socket.on('data', (chunk: Buffer) => {
      if (chunk.toString() === 'RST') socket.resetAndDestroy()
      else socket.write(chunk)
    })
  })
  tunnelEnd.listen(0, '127.0.0.1')
  await once(tunnelEnd, 'listening')
  t.teardown(() => tunnelEnd.close())
  const tunnelPort = (tunnelEnd.address() as { port: number }).port

  const { cp, api } = await startControlPlane(t, 'fake', {
    settings: { server: { port: 0, host: '127.0.0.1' } },
    logger,
  })
  const apiPort = Number(new URL(await cp.listen()).port)
  const tenant = await api.newTenant()
  t.equal((await api.put('/v1/policy', { verify: 'allow' }, { bearer: tenant.apiKey })).status, 200)
  const agent = await api.post('/v1/keys', { email: tenant.email, scope: 'agent' }, { bearer: tenant.apiKey })
  await enrolSystems(api, tenant.apiKey, billingSystems(upstream.origin))
  const proxy = await startEmbeddedProxy(
    t,
    cp,
    null,
    { WRITEGATE_PROXY_API_KEY: agent.body.apiKey, BILLING_TOKEN: 'up-secret' },
    { passthrough: [`127.0.0.1:${tunnelPort}`] },
    { logger, settings: { credentials: BILLING_CREDENTIALS } },
  )
  await waitReady(proxy)
  const metrics = await startMetricsServer(cp.metrics.registry, '127.0.0.1', 0, logger)
  t.teardown(() => metrics.close())

  const admin = { authorization: `Bearer ${tenant.apiKey}` }
  const targets: Target[] = [
    {
      name: 'API',
      port: apiPort,
      probe: '/healthz',
      long: '/v1/receipts/stream',
      post: '/v1/principals',
      headers: admin,
    },
    // The proxy reads a STEP_UP write's body to stage it, and streams an ALLOWed one upstream.
    {
      name: 'proxy, staged body',
      port: proxy.port,
      probe: '/healthz',
      long: '/sys_billing/slow',
      post: '/sys_billing/v1/refunds',
    },
    {
      name: 'proxy, forwarded body',
      port: proxy.port,
      probe: '/healthz',
      long: '/sys_billing/slow',
      post: '/sys_billing/v1/verify',
    },
    { name: 'metrics', port: metrics.port, probe: '/metrics', post: '/metrics' },
  ]

  /** Every port answers a normal request: the API and metrics a GET, the proxy a gated write. */
  async function everyPortServes(t: Test, after: string): Promise<void> {
    t.equal((await get(targets[0] as Target)).status, 200, `API serves after ${after}`)
    t.equal((await get(targets[3] as Target)).status, 200, `metrics serves after ${after}`)
    const written = await post(targets[1] as Target, '/sys_billing/v1/verify', '{}')
    t.equal(written.status, 200, `proxy gates and forwards after ${after}`)
    t.same(unhandled.splice(0), [], `nothing unhandled after ${after}`)
  }

  eachShape(t, targets, everyPortServes)

  t.test('proxy: CONNECT to a refused host, reset after the 403', async (t) => {
    const raw = await open(targets[1] as Target)
    raw.io.write('CONNECT 127.0.0.1:18081 HTTP/1.1\r\nhost: 127.0.0.1:18081\r\n\r\n')
    for (;;) {
      if (Buffer.concat(raw.received).includes('tunnel_refused')) break
      await raw.next()
    }
    t.match(Buffer.concat(raw.received).toString(), /^HTTP\/1\.1 403 /)
    raw.tcp.resetAndDestroy()
    await everyPortServes(t, 'a refused CONNECT reset')
  })

  t.test('proxy: CONNECT to a pass-through host, reset at each step', async (t) => {
    const connectLine = `CONNECT 127.0.0.1:${tunnelPort} HTTP/1.1\r\nhost: 127.0.0.1:${tunnelPort}\r\n\r\n`
    const established = async (raw: Awaited<ReturnType<typeof open>>) => {
      while (!Buffer.concat(raw.received).includes('\r\n\r\n')) await raw.next()
      t.match(Buffer.concat(raw.received).toString(), /^HTTP\/1\.1 200 /)
    }
    // Before the tunnel is established.
    let raw = await open(targets[1] as Target)
    raw.io.write(connectLine)
    raw.tcp.resetAndDestroy()
    await everyPortServes(t, 'CONNECT reset before the tunnel')
    // With bytes in flight through it.
    raw = await open(targets[1] as Target)
    raw.io.write(connectLine)
    await established(raw)
    raw.io.write('hello')
    raw.tcp.resetAndDestroy()
    await everyPortServes(t, 'a tunnel reset by the client')
    // The far end resets the tunnel.
    raw = await open(targets[1] as Target)
    raw.io.write(connectLine)
    await established(raw)
    raw.io.write('RST')
    await new Promise<void>((resolve) => raw.io.once('close', () => resolve()))
    await everyPortServes(t, 'a tunnel reset by the far end')
  })

  for (const target of [targets[0], targets[1], targets[3]] as Target[]) {
    // The limit only catches a hang (a loaded machine is slow); the sockets are released anyway.
    t.test(`${target.name}: 300 idle connections`, { timeout: 90_000 }, async (t) => {
      const release = await idleSockets(target, 300)
      t.teardown(release)
      await everyPortServes(t, `300 idle connections on ${target.name}`)
    })
  }

  t.test('a client is never logged as an error', async (t) => {
    t.same(
      lines.filter((l) => l.level >= LOG_LEVEL.error),
      [],
    )
  })
})
