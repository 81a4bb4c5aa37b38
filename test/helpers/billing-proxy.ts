import type { Test } from 'tap'
import type { SystemsFile } from '../../src/config/systems.js'
import type { Logger } from '../../src/observability/logger.js'
import { startControlPlane } from './control-plane.js'
import { startEmbeddedProxy } from './proxy.js'
import { billingSystems, writeRoutesFile } from './proxy-fixtures.js'
import { RecordingUpstream } from './upstream.js'

/**
 * The usual proxy test bench: a recording billing upstream, a control plane on in-memory
 * PGlite, one tenant, and an embedded gate-proxy acting as that tenant's agent key, ready.
 */
export async function startBillingProxy(
  t: Test,
  opts: {
    systems?: (upstreamOrigin: string) => SystemsFile
    /** Extra `proxy` settings, e.g. `upstreamTimeoutMs`. */
    proxy?: Record<string, unknown>
    logger?: Logger
  } = {},
) {
  const upstream = await new RecordingUpstream().start()
  t.teardown(() => upstream.close())
  const { api, cp } = await startControlPlane(t, 'pglite-memory')
  const tenant = await api.newTenant()
  const agent = await api.post('/v1/keys', { email: tenant.email, scope: 'agent' }, { bearer: tenant.apiKey })
  const proxy = await startEmbeddedProxy(
    t,
    cp,
    writeRoutesFile((opts.systems ?? billingSystems)(upstream.origin)),
    { WRITEGATE_PROXY_API_KEY: agent.body.apiKey, BILLING_TOKEN: 'up-secret' },
    opts.proxy ?? {},
    opts.logger ? { logger: opts.logger } : {},
  )
  for (let i = 0; i < 50 && !(await proxy.proxy.ready()); i++) await new Promise((r) => setTimeout(r, 20))
  return {
    upstream,
    api,
    cp,
    tenant,
    agent: agent.body as { apiKey: string; keyId: string },
    proxy,
    port: proxy.port,
  }
}
