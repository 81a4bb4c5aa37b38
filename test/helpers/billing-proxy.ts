import { generate } from 'otplib'
import type { Test } from 'tap'
import type { SystemsFile } from '../../src/config/systems.js'
import type { GatedWrites } from '../../src/gate/gated-write.js'
import type { Logger } from '../../src/observability/logger.js'
import { startControlPlane } from './control-plane.js'
import { startEmbeddedProxy, waitReady } from './proxy.js'
import { BILLING_CREDENTIALS, billingSystems, enrolSystems } from './proxy-fixtures.js'
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
    /** Custom verbs to register before the systems are enrolled (their routes may name them). */
    verbs?: string[]
    /** Settings for both the control plane and the proxy (a raised quota, say). */
    settings?: Record<string, unknown>
    /** Wraps the gated-write step the proxy calls (to hold a decision at a chosen moment, say). */
    writes?: (real: GatedWrites) => GatedWrites
  } = {},
) {
  const upstream = await new RecordingUpstream().start()
  t.teardown(() => upstream.close())
  // The control plane injects the same credential when it replays an approved write.
  process.env.BILLING_TOKEN = 'up-secret'
  const { api, cp } = await startControlPlane(t, 'pglite-memory', {
    settings: { credentials: BILLING_CREDENTIALS, ...opts.settings },
  })
  const tenant = await api.newTenant()
  const agent = await api.post('/v1/keys', { email: tenant.email, scope: 'agent' }, { bearer: tenant.apiKey })
  for (const name of opts.verbs ?? []) await api.post('/v1/verbs', { name }, { bearer: tenant.apiKey })
  await enrolSystems(api, tenant.apiKey, (opts.systems ?? billingSystems)(upstream.origin))
  const proxy = await startEmbeddedProxy(
    t,
    cp,
    null,
    { WRITEGATE_PROXY_API_KEY: agent.body.apiKey, BILLING_TOKEN: 'up-secret' },
    opts.proxy ?? {},
    {
      ...(opts.logger ? { logger: opts.logger } : {}),
      ...(opts.writes ? { writes: opts.writes(cp.writes) } : {}),
      settings: { credentials: BILLING_CREDENTIALS, ...opts.settings },
    },
  )
  await waitReady(proxy)
  return {
    upstream,
    api,
    cp,
    tenant,
    agent: agent.body as { apiKey: string; keyId: string },
    proxy,
    port: proxy.port,
    /** Approves a staged action as the tenant's admin, with the authenticator's code of this moment. */
    async approve(actionId: string) {
      const totpCode = await generate({
        secret: tenant.totp.secret,
        epoch: Math.floor(cp.clock.nowMs() / 1000),
      })
      return api.post(`/v1/agent/actions/${actionId}/approve`, { totpCode }, { bearer: tenant.apiKey })
    },
  }
}
