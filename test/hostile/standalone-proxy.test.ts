import t, { type Test } from 'tap'
import { startFleet } from '../helpers/fleet.js'
import {
  eachShape,
  get,
  idleSockets,
  open,
  post,
  type Target,
  watchUnhandled,
} from '../helpers/hostile-client.js'

/**
 * The sidecar as deployed (`writegate proxy`): gate-proxy over the Redis hot store, with its
 * own metrics port. No client may crash it or wedge either port.
 */
t.test('hostile clients on a standalone gate-proxy (Redis)', async (t) => {
  const unhandled = watchUnhandled(t)
  const fleet = await startFleet(t, { proxies: 1 })
  t.equal(
    (await fleet.api.put('/v1/policy', { verify: 'allow' }, { bearer: fleet.tenant.apiKey })).status,
    200,
  )
  const proxy = fleet.proxies[0]
  if (!proxy?.metricsPort) throw new Error('the proxy process serves metrics')
  const targets: Target[] = [
    { name: 'proxy', port: proxy.port, probe: '/healthz', post: '/sys_billing/v1/verify' },
    { name: 'metrics', port: proxy.metricsPort, probe: '/metrics', post: '/metrics' },
  ]
  const [proxyTarget, metricsTarget] = targets as [Target, Target]

  async function bothServe(t: Test, after: string): Promise<void> {
    t.equal(
      (await post(proxyTarget, '/sys_billing/v1/verify', '{}')).status,
      200,
      `proxy gates after ${after}`,
    )
    t.equal((await get(metricsTarget)).status, 200, `metrics serve after ${after}`)
    t.same(unhandled.splice(0), [], `nothing unhandled after ${after}`)
  }

  eachShape(t, targets, bothServe)

  t.test('CONNECT to a refused host, reset after the 403', async (t) => {
    const raw = await open(proxyTarget)
    raw.io.write('CONNECT 127.0.0.1:18081 HTTP/1.1\r\nhost: 127.0.0.1:18081\r\n\r\n')
    while (!Buffer.concat(raw.received).includes('tunnel_refused')) await raw.next()
    raw.tcp.resetAndDestroy()
    await bothServe(t, 'a refused CONNECT reset')
  })

  t.test('300 idle connections on each port', { timeout: 20_000 }, async (t) => {
    for (const target of targets) {
      const release = await idleSockets(target, 300)
      await bothServe(t, `300 idle connections on ${target.name}`)
      release()
    }
  })
})
