import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Test } from 'tap'
import type { Logger } from '../../src/observability/logger.js'
import { createInterceptionCa } from '../../src/tls/interception-ca.js'
import { startBillingProxy } from './billing-proxy.js'
import { startHttpsUpstream } from './https-upstream.js'

/**
 * A billing proxy with TLS interception on a transparent TLS port: a real HTTPS upstream at
 * `localhost` (its own CA as the system's caBundle, POST /v1/checks gated as `verify`) and an
 * interception CA for `localhost` in files the proxy reads. `proxy` adds settings (its `tls`
 * merged into the CA files' and port's).
 */
export async function startInterceptingProxy(
  t: Test,
  opts: {
    proxy?: Record<string, unknown> & { tls?: Record<string, unknown> }
    logger?: Logger
    /** The hosts the interception CA may vouch for (`localhost` unless told). */
    caHosts?: string[]
  } = {},
) {
  const upstream = await startHttpsUpstream(t)
  const dir = mkdtempSync(join(tmpdir(), 'wg-intercepting-'))
  const ca = await createInterceptionCa({ hosts: opts.caHosts ?? ['localhost'], days: 1 })
  writeFileSync(join(dir, 'ca.crt'), ca.certPem)
  writeFileSync(join(dir, 'ca.key'), ca.keyPem, { mode: 0o600 })
  const { tls, ...proxy } = opts.proxy ?? {}
  const bench = await startBillingProxy(t, {
    systems: () => ({
      passthrough: [],
      systems: [
        {
          systemId: 'sys_billing',
          kind: 'http' as const,
          upstream: upstream.origin,
          caBundle: upstream.caPem,
          reads: 'pass' as const,
          routes: [{ method: 'POST' as const, path: '/v1/checks', verb: 'verify' }],
          tools: [],
        },
      ],
    }),
    proxy: {
      ...proxy,
      tls: { caCertFile: join(dir, 'ca.crt'), caKeyFile: join(dir, 'ca.key'), port: 0, ...tls },
    },
    ...(opts.logger ? { logger: opts.logger } : {}),
  })
  return { upstream, ca, bench, tlsPort: bench.proxy.tlsPort as number }
}
