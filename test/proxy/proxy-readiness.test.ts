import { createServer } from 'node:net'
import t from 'tap'
import { parseSettings } from '../../src/config/load.js'
import { type RunningProxy, startProxyProcess } from '../../src/proxy/proxy-process.js'
import { startFleet } from '../helpers/fleet.js'
import { agentRequest, capturingLogger, LOG_LEVEL, type LogLine } from '../helpers/proxy.js'
import { startTcpRelay } from '../helpers/tcp-relay.js'
import { waitFor } from '../helpers/wait.js'

/**
 * Issue 14: a proxy that cannot become ready says why, in /readyz and once in its log per
 * change of state; a healthy start logs no warning and no stack trace.
 */

async function closedPort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port
      s.close(() => resolve(port))
    })
  })
}

async function readyz(port: number): Promise<Record<string, unknown>> {
  return (await agentRequest(port, { method: 'GET', path: '/readyz' })).json()
}

/** Waits until /readyz gives `reason` (undefined: ready, no reason). */
async function until(port: number, reason: string | undefined): Promise<Record<string, unknown>> {
  let r = await readyz(port)
  await waitFor(
    async () => {
      r = await readyz(port)
      return r.reason === reason
    },
    20_000,
    () => `readiness to say ${reason} (it says ${JSON.stringify(r)})`,
  )
  return r
}

/**
 * Counts the proxy's readiness checks from now on. Its watcher checks every 2 s, one check at a
 * time: once a third has started, two have run in full since, each of which would have logged a
 * repeated warning.
 */
function countChecks(p: RunningProxy): () => number {
  let asked = 0
  const readiness = p.proxy.readiness.bind(p.proxy)
  p.proxy.readiness = () => {
    asked++
    return readiness()
  }
  return () => asked
}

const warnings = (lines: LogLine[]) => lines.filter((l) => l.level >= LOG_LEVEL.warn)
const stacks = (lines: LogLine[]) => lines.filter((l) => JSON.stringify(l).includes('"stack"'))

t.test('readiness says why, and the log says it once per change', async (t) => {
  const fleet = await startFleet(t, { proxies: 0 })
  const start = async (env: Record<string, string>, redisUrl = fleet.redisUrl) => {
    const { logger, lines } = capturingLogger()
    const settings = parseSettings({
      redis: { url: redisUrl, keyPrefix: fleet.prefix },
      credentials: { allowEnv: ['BILLING_TOKEN'] },
      proxy: { port: 0, host: '127.0.0.1' },
      metrics: { port: 0, host: '127.0.0.1' },
    })
    const p = await startProxyProcess(settings, {
      env: { BILLING_TOKEN: 'x', ...env },
      clock: fleet.cp.clock,
      logger,
    })
    t.teardown(() => p.close())
    return { p, lines }
  }

  t.test('a healthy start: ready, no warning, no stack', async (t) => {
    const { p, lines } = await start({ WRITEGATE_PROXY_API_KEY: fleet.agent.apiKey })
    await waitFor(async () => (await readyz(p.port)).ready === true, 20_000, 'readiness')
    t.same(await readyz(p.port), { ready: true })
    // Past two of the readiness watcher's own checks, which would log what they found wrong.
    const checks = countChecks(p)
    await waitFor(
      () => checks() >= 3,
      30_000,
      () => `two readiness checks (${checks()} started)`,
    )
    t.same(warnings(lines), [], 'no warning')
    t.same(stacks(lines), [], 'no stack trace')
    t.ok(lines.some((l) => l.msg === 'gate-proxy ready'))
  })

  t.test('a key the hot store does not know (never issued, or another Redis or key prefix)', async (t) => {
    const { p, lines } = await start({ WRITEGATE_PROXY_API_KEY: `svc_${'q'.repeat(40)}` })
    t.same(await until(p.port, 'unknown_key'), { ready: false, reason: 'unknown_key' })
    const w = await agentRequest(p.port, { method: 'POST', path: '/sys_billing/v1/verify', body: '{}' })
    t.same([w.status, w.json().code], [503, 'gate_unavailable'])
    const checks = countChecks(p)
    await new Promise((resolve) => setTimeout(resolve, 2300)) // past a retry of the lookup
    await waitFor(
      () => checks() >= 3,
      30_000,
      () => `two readiness checks (${checks()} started)`,
    )
    const said = warnings(lines).filter((l) => l.reason === 'unknown_key')
    t.equal(said.length, 1, 'said once, though it is retried')
    t.match(said[0]?.msg, /another Redis or key prefix/)
    t.same(stacks(lines), [])
  })

  t.test('no key configured', async (t) => {
    const { p, lines } = await start({})
    t.same(await until(p.port, 'no_key'), { ready: false, reason: 'no_key' })
    t.equal(warnings(lines).filter((l) => l.reason === 'no_key').length, 1)
  })

  t.test('the hot store gone after the proxy was ready: not ready until it is back', async (t) => {
    const relay = await startTcpRelay(t, new URL(fleet.redisUrl), 6379)
    const { p, lines } = await start({ WRITEGATE_PROXY_API_KEY: fleet.agent.apiKey }, relay.url)
    t.match(await until(p.port, undefined), { ready: true }, 'ready on Redis through the relay')
    // Redis stops answering; the snapshot is still in the proxy's cache.
    relay.stall()
    t.same(await until(p.port, 'hot_store_unreachable'), { ready: false, reason: 'hot_store_unreachable' })
    const w = await agentRequest(p.port, { method: 'POST', path: '/sys_billing/v1/verify', body: '{}' })
    t.same([w.status, w.json().code], [503, 'gate_unavailable'], 'as every write is refused')
    t.equal(warnings(lines).filter((l) => l.reason === 'hot_store_unreachable').length, 1, 'said once')
    relay.resume()
    t.match(await until(p.port, undefined), { ready: true }, 'ready again once Redis answers')
  })

  t.test('the hot store unreachable', async (t) => {
    const { p, lines } = await start(
      { WRITEGATE_PROXY_API_KEY: fleet.agent.apiKey },
      `redis://127.0.0.1:${await closedPort()}`,
    )
    t.same(await until(p.port, 'hot_store_unreachable'), { ready: false, reason: 'hot_store_unreachable' })
    const w = await agentRequest(p.port, { method: 'POST', path: '/sys_billing/v1/verify', body: '{}' })
    t.same([w.status, w.json().code], [503, 'gate_unavailable'])
    // Past two more of the watcher's checks (not a fixed delay, which might see none of them).
    const checks = countChecks(p)
    await waitFor(
      () => checks() >= 3,
      30_000,
      () => `two readiness checks (${checks()} started)`,
    )
    t.equal(warnings(lines).filter((l) => l.reason === 'hot_store_unreachable').length, 1, 'said once')
    t.same(stacks(lines), [], 'Redis being down is a state, not a stack trace')
  })
})
