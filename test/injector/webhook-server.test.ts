import { X509Certificate } from 'node:crypto'
import { readFileSync, writeFileSync } from 'node:fs'
import { request } from 'node:https'
import { join } from 'node:path'
import { Writable } from 'node:stream'
import t from 'tap'
import { parseSettings } from '../../src/config/load.js'
import { createInjector } from '../../src/injector/injector-process.js'
import { applyJsonPatch, type JsonPatchOp } from '../../src/injector/jsonpatch.js'
import type { Pod } from '../../src/injector/kube-types.js'
import { createLogger } from '../../src/observability/logger.js'
import { selfSigned } from '../helpers/self-signed.js'
import { waitFor } from '../helpers/wait.js'

interface Reply {
  status: number
  body: string
  json: Record<string, unknown>
  peerCert: string
}

function call(
  port: number,
  ca: string,
  method: string,
  path: string,
  body?: string | Buffer,
  headers: Record<string, string> = { 'content-type': 'application/json' },
): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: '127.0.0.1', servername: 'localhost', port, method, path, ca, headers, agent: false },
      (res) => {
        const chunks: Buffer[] = []
        res.on('data', (c: Buffer) => chunks.push(c))
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8')
          let json: Record<string, unknown> = {}
          try {
            json = JSON.parse(text)
          } catch {}
          const peer = (res.socket as import('node:tls').TLSSocket).getPeerCertificate()
          resolve({ status: res.statusCode ?? 0, body: text, json, peerCert: peer.fingerprint256 })
        })
      },
    )
    req.on('error', reject)
    req.end(body)
  })
}

t.test('the injector answers AdmissionReviews over real HTTPS', async (t) => {
  const first = selfSigned('injector-a')
  const lines: string[] = []
  const sink = new Writable({
    write(chunk, _enc, done) {
      lines.push(String(chunk))
      done()
    },
  })
  const settings = parseSettings({
    log: { level: 'debug' },
    injector: {
      host: '127.0.0.1',
      port: 0,
      tls: { certFile: first.cert, keyFile: first.key, reloadSeconds: 1 },
      proxy: { image: 'registry.example/writegate:1.2.3' },
    },
  })
  const injector = createInjector(settings, { logger: createLogger('debug', sink) })
  const { port } = await injector.listen()
  t.teardown(() => injector.close())
  const ca = first.pem

  const review = readFileSync(join(import.meta.dirname, 'fixtures', 'review-annotated-pod.json'), 'utf8')
  const ok = await call(port, ca, 'POST', '/mutate', review)
  t.equal(ok.status, 200)
  const response = ok.json.response as { uid: string; allowed: boolean; patchType: string; patch: string }
  t.equal(response.uid, '705ab4f5-6393-11e8-b7cc-42010a800002')
  t.equal(response.allowed, true)
  t.equal(response.patchType, 'JSONPatch')
  const patch = JSON.parse(Buffer.from(response.patch, 'base64').toString('utf8')) as { path: string }[]
  t.equal(patch.length, 14)
  t.equal(patch[0]?.path, '/metadata/labels/writegate.io~1proxy')

  const health = await call(port, ca, 'GET', '/healthz')
  t.same([health.status, health.json], [200, { status: 'ok' }])

  t.test('errors are clear JSON, and the server keeps answering', async (t) => {
    const cases: [
      string,
      string,
      string | Buffer | undefined,
      Record<string, string> | undefined,
      number,
      string,
    ][] = [
      ['POST', '/mutate', '{"apiVersion":', undefined, 400, 'invalid_json'],
      ['POST', '/mutate', '{"apiVersion":"admission.k8s.io/v1"}', undefined, 400, 'invalid_request'],
      ['POST', '/mutate', '{"__proto__":{"x":1}}', undefined, 400, 'invalid_json'],
      ['POST', '/mutate', review, { 'content-type': 'text/plain' }, 415, 'unsupported_media_type'],
      ['POST', '/mutate', Buffer.alloc(3 * 1024 * 1024 + 1, 32), undefined, 413, 'payload_too_large'],
      ['GET', '/mutate', undefined, undefined, 404, 'not_found'],
      ['POST', '/validate', review, undefined, 404, 'not_found'],
    ]
    for (const [method, path, body, headers, status, code] of cases) {
      const r = await call(port, ca, method, path, body, headers)
      t.equal(r.status, status, `${method} ${path} ${status}`)
      t.equal(r.json.code, code)
      t.type(r.json.error, 'string')
      const again = await call(port, ca, 'GET', '/healthz')
      t.equal(again.status, 200, 'still serving')
    }
    const bad = await call(port, ca, 'POST', '/mutate', '{"apiVersion":"admission.k8s.io/v1"}')
    t.match(bad.json.error, /^invalid AdmissionReview: kind: /)
  })

  t.test("a change to an injected pod's proxy is refused on the same endpoint", async (t) => {
    const created = JSON.parse(review)
    const before = applyJsonPatch(created.request.object, patch as JsonPatchOp[]) as Pod
    const after = structuredClone(before)
    const proxy = [...(after.spec.initContainers ?? []), ...after.spec.containers].find(
      (c) => c.name === 'writegate-proxy',
    )
    if (proxy) proxy.image = 'evil.example/nogate:1'
    const update = {
      ...created,
      request: {
        ...created.request,
        uid: 'uid-update',
        operation: 'UPDATE',
        object: after,
        oldObject: before,
      },
    }
    const r = await call(port, ca, 'POST', '/mutate', JSON.stringify(update))
    t.equal(r.status, 200)
    t.match(r.json.response, {
      uid: 'uid-update',
      allowed: false,
      status: {
        code: 400,
        message: /^container writegate-proxy was injected by writegate and cannot be changed/,
      },
    })
    t.notOk((r.json.response as { patch?: string }).patch, 'an update is never patched')
  })

  t.test('logs say what happened to which pod, never the review or its secrets', async (t) => {
    const log = lines.join('')
    t.match(log, /"outcome":"injected"/)
    t.match(log, /"pod":"billing-agent-6d8f7c9b5-"/)
    t.match(log, /"namespace":"agents"/)
    for (const leak of [
      'billing-api-token',
      'billing-agent-writegate',
      'registry.example/billing-agent',
      'HTTP_PROXY',
    ])
      t.notOk(log.includes(leak), `no ${leak} in the log`)
    // The serializer keeps to its fields even if a caller hands it the whole review.
    injector.logger.info({ review: { outcome: 'skipped', object: { apiKey: 'svc_abc' } } }, 'x')
    const last = JSON.parse(lines.at(-1) as string)
    t.same(last.review, { outcome: 'skipped' })
    t.equal(last.component, 'injector')
  })

  t.test('a renewal whose key does not match its certificate is not swapped in', async (t) => {
    const before = await call(port, ca, 'GET', '/healthz')
    const stranger = selfSigned('injector-stranger')
    const goodKey = readFileSync(first.key)
    writeFileSync(first.key, readFileSync(stranger.key))
    t.teardown(() => writeFileSync(first.key, goodKey))
    await waitFor(
      () => lines.some((l) => l.includes('keeping the current certificate')),
      15_000,
      'the renewal to be refused',
    )
    t.ok(lines.some((l) => l.includes('keeping the current certificate')))
    const after = await call(port, ca, 'GET', '/healthz')
    t.same([after.status, after.peerCert], [200, before.peerCert], 'still served, by the pair that works')
  })

  t.test('a renewed certificate is picked up without a restart', async (t) => {
    const second = selfSigned('injector-b')
    const before = await call(port, ca, 'GET', '/healthz')
    t.equal(before.peerCert, new X509Certificate(first.pem).fingerprint256)
    // cert-manager rewrites the Secret in place: same paths, new content.
    writeFileSync(first.key, readFileSync(second.key))
    writeFileSync(first.cert, second.pem)
    const want = new X509Certificate(second.pem).fingerprint256
    let seen = before.peerCert
    for (let i = 0; i < 100 && seen !== want; i++) {
      await new Promise((r) => setTimeout(r, 100))
      seen = (await call(port, second.pem, 'GET', '/healthz').catch(() => before)).peerCert
    }
    t.equal(seen, want, 'the new certificate is served')
  })
})

t.test(
  'a certificate and key that cannot serve stop start-up with one line naming the setting',
  async (t) => {
    const a = selfSigned('injector-c')
    const b = selfSigned('injector-d')
    const start = (certFile: string, keyFile: string) => () =>
      createInjector(
        parseSettings({
          log: { level: 'silent' },
          injector: { tls: { certFile, keyFile }, proxy: { image: 'registry.example/writegate:1.2.3' } },
        }),
      )
    t.throws(start(a.cert, b.key), {
      message: `invalid setting injector.tls.keyFile (WRITEGATE_INJECTOR_TLS_KEY_FILE): the key does not match the certificate in ${a.cert}`,
    })
    t.throws(start(a.key, a.key), {
      message: `invalid setting injector.tls.certFile (WRITEGATE_INJECTOR_TLS_CERT_FILE): ${a.key} is not a PEM certificate`,
    })
    t.throws(start(a.cert, a.cert), {
      message: `invalid setting injector.tls.keyFile (WRITEGATE_INJECTOR_TLS_KEY_FILE): ${a.cert} is not a PEM private key`,
    })
  },
)
