import { once } from 'node:events'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { request } from 'node:http'
import { connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { connect as tlsConnect } from 'node:tls'
import t from 'tap'
import { createInterceptionCa } from '../../src/tls/interception-ca.js'
import { startBillingProxy } from '../helpers/billing-proxy.js'
import { startControlPlane } from '../helpers/control-plane.js'
import { startHttpsUpstream } from '../helpers/https-upstream.js'
import { startEmbeddedProxy, waitReady } from '../helpers/proxy.js'
import { BILLING_CREDENTIALS, enrolSystems } from '../helpers/proxy-fixtures.js'

/**
 * A host that is both enrolled and on the pass-through list (listed first, enrolled later, say)
 * is never tunnelled opaque: not when the interception CA cannot vouch for it, and not while the
 * proxy cannot read what is enrolled. Each case writes a denied `POST /v1/wipe` through a client
 * that trusts the upstream's own CA (what an ungated tunnel would let it reach).
 */

const ROUTES = [{ method: 'POST' as const, path: '/v1/wipe', verb: 'repo.delete' }]
/** The enrolled https system every case puts on localhost, verified against its own CA. */
const billingOn = (upstream: { origin: string; caPem: string }) => ({
  systemId: 'sys_billing',
  kind: 'http' as const,
  upstream: upstream.origin,
  caBundle: upstream.caPem,
  reads: 'pass' as const,
  routes: ROUTES,
  tools: [],
})
const wipe = (port: number) =>
  `POST /v1/wipe HTTP/1.1\r\nHost: localhost:${port}\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}`

/** What a CONNECT to localhost:`port` answers, and, if it opens, the status of a wipe through it. */
function viaConnect(proxyPort: number, port: number, ca: string): Promise<string> {
  return new Promise((resolve) => {
    request({ host: '127.0.0.1', port: proxyPort, method: 'CONNECT', path: `localhost:${port}` })
      .on('connect', (res, socket) => {
        if (res.statusCode !== 200) {
          socket.destroy()
          return resolve(`CONNECT ${res.statusCode}`)
        }
        const tls = tlsConnect({ socket, servername: 'localhost', ca }, () => tls.write(wipe(port)))
        let text = ''
        tls.on('data', (d) => (text += d))
        tls.on('end', () => resolve(text.split('\r\n')[0] as string))
        tls.on('error', (e) => resolve(`tls error ${e.message}`))
      })
      .on('error', (e) => resolve(`error ${e.message}`))
      .end()
  })
}

/** A wipe through the TLS port with SNI localhost, or how the connection ended. */
function viaTlsPort(tlsPort: number, port: number, ca: string): Promise<string> {
  return new Promise((resolve) => {
    const tls = tlsConnect({ host: '127.0.0.1', port: tlsPort, servername: 'localhost', ca }, () =>
      tls.write(wipe(port)),
    )
    let text = ''
    tls.on('data', (d) => (text += d))
    tls.on('end', () => resolve(text.split('\r\n')[0] || 'closed'))
    tls.on('error', (e) => resolve(`tls error ${(e as NodeJS.ErrnoException).code ?? e.message}`))
  })
}

async function caFiles(hosts: string[]) {
  const dir = mkdtempSync(join(tmpdir(), 'wg-overlap-'))
  const ca = await createInterceptionCa({ hosts, days: 1 })
  writeFileSync(join(dir, 'ca.crt'), ca.certPem)
  writeFileSync(join(dir, 'ca.key'), ca.keyPem, { mode: 0o600 })
  return { ca, caCertFile: join(dir, 'ca.crt'), caKeyFile: join(dir, 'ca.key') }
}

t.test('an enrolled host the interception CA cannot vouch for is refused, not tunnelled', async (t) => {
  const upstream = await startHttpsUpstream(t)
  // Made before localhost was enrolled (its rotation not done yet): it does not permit localhost.
  const { caCertFile, caKeyFile } = await caFiles(['example.com'])
  const bench = await startBillingProxy(t, {
    systems: () => ({ passthrough: [], systems: [billingOn(upstream)] }),
    verbs: ['repo.delete'],
    proxy: {
      passthrough: [`localhost:${upstream.port}`, 'localhost'],
      tls: { caCertFile, caKeyFile, port: 0, passthroughPort: upstream.port },
    },
  })
  t.equal(await viaConnect(bench.port, upstream.port, upstream.caPem), 'CONNECT 403', 'CONNECT: refused')
  t.match(
    await viaTlsPort(bench.proxy.tlsPort as number, upstream.port, upstream.caPem),
    /closed|tls error/,
    'TLS port: closed',
  )
  t.same(upstream.received, [], 'the upstream received nothing')
})

t.test('while the proxy cannot read what is enrolled, a listed host is not tunnelled', async (t) => {
  const upstream = await startHttpsUpstream(t)
  const { ca, caCertFile, caKeyFile } = await caFiles(['localhost'])
  const { api, cp } = await startControlPlane(t, 'pglite-memory', {
    settings: { credentials: BILLING_CREDENTIALS },
  })
  const tenant = await api.newTenant()
  const agent = await api.post('/v1/keys', { email: tenant.email, scope: 'agent' }, { bearer: tenant.apiKey })
  await api.post('/v1/verbs', { name: 'repo.delete' }, { bearer: tenant.apiKey })
  await enrolSystems(api, tenant.apiKey, { passthrough: [], systems: [billingOn(upstream)] })
  let unreadable = false
  const snapshots = {
    ...cp.snapshots,
    get: (id: string) => (unreadable ? Promise.reject(new Error('Redis unreachable')) : cp.snapshots.get(id)),
  }
  const proxy = await startEmbeddedProxy(
    t,
    { ...cp, snapshots } as never,
    null,
    { WRITEGATE_PROXY_API_KEY: agent.body.apiKey as string },
    {
      passthrough: ['localhost', `localhost:${upstream.port}`],
      tls: { caCertFile, caKeyFile, port: 0, passthroughPort: upstream.port },
    },
    { settings: { credentials: BILLING_CREDENTIALS } },
  )
  await waitReady(proxy)
  t.match(
    await viaConnect(proxy.port, upstream.port, ca.certPem),
    /^HTTP\/1\.1 403/,
    'readable: CONNECT gated (DENY)',
  )
  t.match(
    await viaTlsPort(proxy.tlsPort as number, upstream.port, ca.certPem),
    /^HTTP\/1\.1 403/,
    'readable: TLS port gated (DENY)',
  )

  unreadable = true
  t.equal(
    await viaConnect(proxy.port, upstream.port, upstream.caPem),
    'CONNECT 503',
    'unreadable: CONNECT refused',
  )
  t.match(
    await viaTlsPort(proxy.tlsPort as number, upstream.port, upstream.caPem),
    /closed|tls error/,
    'unreadable: TLS port closed',
  )
  t.same(upstream.received, [], 'the upstream received nothing')
})

t.test('without an interception CA, a listed host is tunnelled only to a port no system is on', async (t) => {
  const upstream = await startHttpsUpstream(t)
  const other = await startHttpsUpstream(t)
  const bench = await startBillingProxy(t, {
    systems: () => ({ passthrough: [], systems: [billingOn(upstream)] }),
    verbs: ['repo.delete'],
    proxy: { passthrough: [`localhost:${upstream.port}`, `localhost:${other.port}`] },
  })
  t.equal(
    await viaConnect(bench.port, upstream.port, upstream.caPem),
    'CONNECT 403',
    "the enrolled system's port: refused",
  )
  t.same(upstream.received, [], 'which received nothing')
  t.match(
    await viaConnect(bench.port, other.port, other.caPem),
    /^HTTP\/1\.1 /,
    'another port of the host: tunnelled',
  )
  t.equal(other.received.length, 1, 'and reached, opaque')
  // Found in review: the authority's extra segments were ignored, and the listed host tunnelled.
  for (const authority of [`localhost:${other.port}:1`, `localhost:${other.port}:${other.port}`]) {
    const socket = connect(bench.port, '127.0.0.1')
    socket.on('error', () => {})
    socket.write(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n\r\n`)
    const [first] = (await once(socket, 'data')) as [Buffer]
    socket.destroy()
    t.match(first.toString('latin1'), /^HTTP\/1\.1 403[\s\S]*tunnel_refused/, `CONNECT ${authority}: refused`)
  }
})
