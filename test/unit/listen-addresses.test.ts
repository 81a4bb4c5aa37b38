import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { listenAs } from '../../src/config/listen-errors.js'
import { loadSettings } from '../../src/config/load.js'
import type { Settings } from '../../src/config/schema.js'
import type { InjectionRequest } from '../../src/injector/injection-annotations.js'
import { injectorOptions } from '../../src/injector/injector-process.js'
import { enforceInitContainer, proxyContainer } from '../../src/injector/proxy-sidecar.js'
import { imageEnv } from '../helpers/image.js'

const ROOT = join(import.meta.dirname, '..', '..')

function hosts(s: Settings) {
  return { server: s.server.host, proxy: s.proxy.host, metrics: s.metrics.host, injector: s.injector.host }
}

t.test('every listener is on loopback by default: the schema and the settings file', async (t) => {
  const loopback = { server: '127.0.0.1', proxy: '127.0.0.1', metrics: '127.0.0.1', injector: '127.0.0.1' }
  // No settings file at all (an empty working directory).
  const cwd = process.cwd()
  process.chdir(mkdtempSync(join(tmpdir(), 'wg-listen-')))
  t.teardown(() => process.chdir(cwd))
  t.same(hosts(loadSettings({})), loopback, 'schema defaults')
  // What `npm start` reads.
  t.same(hosts(loadSettings({ WRITEGATE_CONFIG: join(ROOT, 'config', 'writegate.yaml') })), loopback)
})

t.test('the image listens on every interface: its ENV over the settings file it ships', async (t) => {
  t.same(hosts(loadSettings(imageEnv())), {
    server: '::',
    proxy: '::',
    metrics: '::',
    injector: '::',
  })
})

t.test('the injected proxy listens on :: where iptables redirects, whatever its image sets', async (t) => {
  const opts = injectorOptions(loadSettings(imageEnv()))
  const request: InjectionRequest = {
    routesConfigMap: null,
    tlsCaSecret: null,
    proxySecret: 'writegate-proxy',
    credentialSecrets: [],
    credentialEnv: [],
    passthrough: [],
    baseUrls: [],
    enforce: true,
  }
  const plain = (c: ReturnType<typeof proxyContainer>) =>
    Object.fromEntries(
      (c.env ?? []).filter((e) => e.value !== undefined).map((e) => [e.name, e.value as string]),
    )
  const sidecarEnv = plain(proxyContainer(request, opts))
  // Its env over the image's, and over an image that sets no *_HOST at all.
  for (const base of [imageEnv(), { WRITEGATE_CONFIG: join(ROOT, 'config', 'writegate.yaml') }]) {
    const s = loadSettings({ ...base, ...sidecarEnv })
    t.equal(s.proxy.host, '::', 'both families, on every interface (the kubelet probes the pod IP)')
    t.equal(s.metrics.host, '::', 'scraped on the pod IP, of either family')
    t.equal(s.proxy.port, opts.proxy.port)
  }
  const script = enforceInitContainer(opts, request).command?.join(' ') ?? ''
  t.match(script, `REDIRECT --to-ports ${opts.proxy.port}`, 'the enforce redirect goes to that port')
})

t.test('"::" falls back to 0.0.0.0 on a machine without IPv6, and only then', async (t) => {
  const refuse = (code: string) => Object.assign(new Error(`listen ${code}`), { code })
  const tried: string[] = []
  const noIpv6 = async (host: string) => {
    tried.push(host)
    if (host === '::') throw refuse('EAFNOSUPPORT')
    return `listening on ${host}`
  }
  t.equal(await listenAs('proxy', '::', 15001, noIpv6), 'listening on 0.0.0.0')
  t.same(tried, ['::', '0.0.0.0'], 'tried :: first')
  // Anything else on "::" is the setting's fault, named as before.
  await t.rejects(
    listenAs('proxy', '::', 15001, async () => {
      throw refuse('EADDRINUSE')
    }),
    { message: /^invalid setting proxy\.port \(WRITEGATE_PROXY_PORT\): \[::\]:15001 is in use$/ },
  )
  // An address the operator named is never swapped for another.
  await t.rejects(
    listenAs('server', '::1', 8080, async () => {
      throw refuse('EAFNOSUPPORT')
    }),
    { message: /^invalid setting server\.host \(WRITEGATE_HOST\): cannot listen on ::1/ },
  )
})
