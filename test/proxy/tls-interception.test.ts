import { execFile } from 'node:child_process'
import { once } from 'node:events'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { type AddressInfo, connect, createServer as createNetServer, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { createInterceptionCa } from '../../src/tls/interception-ca.js'
import { startBillingProxy } from '../helpers/billing-proxy.js'
import { tlsClientHello, watchUnhandled } from '../helpers/hostile-client.js'
import { startHttpsUpstream } from '../helpers/https-upstream.js'
import { startInterceptingProxy } from '../helpers/intercepting-proxy.js'
import { waitFor } from '../helpers/wait.js'

/** Whether the socket is closed (by the proxy) within `ms`; false if it is still open then. */
function closesWithin(socket: Socket, ms: number): Promise<boolean> {
  return new Promise<boolean>((resolve) => {
    const timer = setTimeout(() => resolve(false), ms)
    socket.on('close', () => {
      clearTimeout(timer)
      resolve(true)
    })
  })
}

/**
 * Issue 17: HTTPS writes gated through TLS interception, with real TLS clients that trust the
 * tenant's interception CA (curl, Node, Python) and a real HTTPS upstream on loopback.
 */

function run(cmd: string, args: string[], env: Record<string, string> = {}) {
  return new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    // No proxy or CA settings from the machine: each client is told exactly what to trust.
    const base = Object.fromEntries(
      Object.entries(process.env).filter(([k]) => !/proxy|CA_BUNDLE|CERT_FILE|CERT_DIR|EXTRA_CA/i.test(k)),
    )
    execFile(cmd, args, { env: { ...base, ...env }, timeout: 20_000 }, (err, stdout, stderr) =>
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    )
  })
}

/**
 * curl as a transparently redirected agent: `connectTo` sends the host's connection to the TLS
 * port, `cacert` is all it trusts; prints the body, then the status on the last line.
 */
const curlTransparent = (connectTo: string, cacert: string, url: string, body: string) =>
  run('curl', [
    '-s',
    '-o',
    '-',
    '-w',
    '\n%{http_code}',
    '--noproxy',
    '*',
    '--connect-to',
    connectTo,
    '--cacert',
    cacert,
    '-X',
    'POST',
    '-H',
    'content-type: application/json',
    '-d',
    body,
    url,
  ])

t.test('HTTPS writes through TLS interception', async (t) => {
  const upstream = await startHttpsUpstream(t)
  const untrusted = await startHttpsUpstream(t)
  const dir = mkdtempSync(join(tmpdir(), 'wg-tls-'))
  const ca = await createInterceptionCa({ hosts: ['localhost'], days: 1 })
  const caFile = join(dir, 'ca.crt')
  writeFileSync(caFile, ca.certPem)
  writeFileSync(join(dir, 'ca.key'), ca.keyPem, { mode: 0o600 })
  const credential = { header: 'authorization', prefix: 'Bearer ', fromEnv: 'BILLING_TOKEN' }
  const routes = [
    { method: 'POST' as const, path: '/v1/checks', verb: 'verify' },
    { method: 'POST' as const, path: '/v1/refunds', verb: 'refund' },
    { method: 'POST' as const, path: '/v1/wipe', verb: 'repo.delete' },
  ]
  const billing = {
    systemId: 'sys_billing',
    kind: 'http' as const,
    upstream: upstream.origin,
    caBundle: upstream.caPem,
    credential,
    reads: 'pass' as const,
    routes,
    tools: [],
  }
  // The handshake limit of the shared bench is far above what a client on a loaded machine
  // needs; the stalled handshake is tested on a proxy of its own with a short one.
  const bench = await startBillingProxy(t, {
    systems: (origin) => ({
      passthrough: [],
      systems: [
        // Plain http on the same host name: never what a tunnel (minted for https) reaches.
        {
          systemId: 'sys_plain',
          kind: 'http' as const,
          upstream: `http://localhost:${new URL(origin).port}`,
          credential,
          reads: 'pass',
          routes,
          tools: [],
        },
        billing,
        // Its upstream's certificate chains to a CA the system does not name: never trusted.
        {
          systemId: 'sys_untrusted',
          kind: 'http' as const,
          upstream: untrusted.origin,
          credential,
          reads: 'pass',
          routes,
          tools: [],
        },
      ],
    }),
    verbs: ['repo.delete'],
    proxy: {
      tls: { caCertFile: caFile, caKeyFile: join(dir, 'ca.key'), handshakeTimeoutMs: 10_000, port: 0 },
    },
  })
  const proxyUrl = `http://127.0.0.1:${bench.port}`
  const url = (path: string, up = upstream) => `https://localhost:${up.port}${path}`
  const curl = (path: string, extra: string[] = [], up = upstream, body = '{"amount":5}') =>
    run('curl', [
      '-s',
      '-o',
      '-',
      '-w',
      '\n%{http_code}',
      '--noproxy',
      '',
      '-x',
      proxyUrl,
      '--cacert',
      caFile,
      '-X',
      'POST',
      '-H',
      'content-type: application/json',
      '-d',
      body,
      ...extra,
      url(path, up),
    ])
  const status = (r: { stdout: string }) => Number(r.stdout.trim().split('\n').at(-1))
  const receipts = async () =>
    (
      await bench.cp.database!.sql<{ body: string }[]>`select body from receipts
        where tenant_id = ${bench.tenant.tenantId} and kind = 'CHECK' order by seq`
    ).map((r) => JSON.parse(r.body))

  t.test(
    'curl --proxy: ALLOW reaches the upstream with the credential; DENY and STEP_UP never do',
    async (t) => {
      const allowed = await curl('/v1/checks')
      t.equal(status(allowed), 200, allowed.stderr)
      t.equal(upstream.received.length, 1)
      t.equal(upstream.received[0]?.headers.authorization, 'Bearer up-secret', 'injected by the proxy')
      t.match(upstream.received[0]?.headers['x-writegate-receipt'], /^rcp_/)
      t.match((await receipts()).at(-1), {
        decision: 'ALLOW',
        verb: 'verify',
        detail: { systemId: 'sys_billing' },
      })
      const denied = await curl('/v1/wipe')
      t.equal(status(denied), 403)
      t.match(denied.stdout, /"decision":"DENY"/)
      const stepUp = await curl('/v1/refunds')
      t.equal(status(stepUp), 428)
      t.equal(upstream.received.length, 1, 'the upstream saw the ALLOW only')
    },
  )

  t.test('an upstream that echoes the injected credential: the agent never reads it', async (t) => {
    t.teardown(() => {
      upstream.answer = (_req, res) =>
        res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}')
    })
    upstream.answer = (req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' })
      res.write('{"echo":')
      setTimeout(() => res.end(`${JSON.stringify(req.headers)}}`), 20)
    }
    const inBody = await curl('/v1/checks')
    t.equal(upstream.received.at(-1)?.headers.authorization, 'Bearer up-secret', 'the upstream got it')
    t.match(inBody.stdout, /^\{"echo":/, 'the agent got the answer up to the echo')
    t.notOk(inBody.stdout.includes('up-secret'), 'and not the secret: the answer was cut there')
    upstream.answer = (req, res) => res.writeHead(200, { 'x-seen': String(req.headers.authorization) }).end()
    const inHeader = await curl('/v1/checks', ['-i'])
    t.equal(status(inHeader), 502)
    t.match(inHeader.stdout, /"code":"answer_withheld","reason":"credential_echoed"/)
    t.notOk(inHeader.stdout.includes('up-secret'))
  })

  t.test('Node (NODE_EXTRA_CA_CERTS) and Python (SSL_CERT_FILE) through the proxy', async (t) => {
    const script = `
      const http = require('node:http'), https = require('node:https')
      const [proxyPort, port, path] = process.argv.slice(1)
      http.request({ host: '127.0.0.1', port: proxyPort, method: 'CONNECT', path: 'localhost:' + port })
        .on('connect', (res, socket) => {
          const req = https.request({ host: 'localhost', port, path, method: 'POST', socket, agent: false,
            headers: { 'content-type': 'application/json' } }, (r) => { console.log(r.statusCode); r.resume() })
          req.on('error', (e) => { console.log('error ' + e.code); process.exit(0) })
          req.end('{"amount":1}')
        }).end()`
    const node = async (path: string) =>
      (
        await run(process.execPath, ['-e', script, String(bench.port), String(upstream.port), path], {
          NODE_EXTRA_CA_CERTS: caFile,
        })
      ).stdout.trim()
    const before = upstream.received.length
    t.equal(await node('/v1/checks'), '200')
    t.equal(await node('/v1/wipe'), '403')
    t.equal(await node('/v1/refunds'), '428')
    t.equal(upstream.received.length, before + 1)

    const py = `
import sys, urllib.request, urllib.error
req = urllib.request.Request(sys.argv[1], data=b'{"amount":2}', headers={'content-type': 'application/json'}, method='POST')
try:
    print(urllib.request.urlopen(req, timeout=10).status)
except urllib.error.HTTPError as e:
    print(e.code)
`
    const python = async (path: string) =>
      (
        await run('python3', ['-c', py, url(path)], {
          https_proxy: proxyUrl,
          HTTPS_PROXY: proxyUrl,
          SSL_CERT_FILE: caFile,
        })
      ).stdout.trim()
    t.equal(await python('/v1/checks'), '200')
    t.equal(await python('/v1/wipe'), '403')
    t.equal(await python('/v1/refunds'), '428')
    t.equal(upstream.received.length, before + 2)
  })

  t.test('transparent mode: the TLS port takes the host from SNI (curl --connect-to)', async (t) => {
    const tlsPort = bench.proxy.tlsPort as number
    t.ok(tlsPort > 0, 'the TLS port listens')
    const connectTo = `localhost:${upstream.port}:127.0.0.1:${tlsPort}`
    const transparent = (path: string) => curlTransparent(connectTo, caFile, url(path), '{"amount":7}')
    const before = upstream.received.length
    const allowed = await transparent('/v1/checks')
    t.equal(status(allowed), 200, allowed.stderr)
    t.equal(upstream.received.at(-1)?.headers.authorization, 'Bearer up-secret')
    t.equal(status(await transparent('/v1/wipe')), 403)
    t.equal(status(await transparent('/v1/refunds')), 428)
    t.equal(upstream.received.length, before + 1, 'only the ALLOW reached the upstream')
    const unenrolled = await run('curl', [
      '-s',
      '--noproxy',
      '*',
      '--connect-to',
      `example.invalid:443:127.0.0.1:${tlsPort}`,
      '--cacert',
      caFile,
      'https://example.invalid/',
    ])
    t.not(unenrolled.code, 0, 'an SNI of no enrolled host: the handshake fails')
    const noSni = await run('openssl', [
      's_client',
      '-connect',
      `127.0.0.1:${tlsPort}`,
      '-noservername',
      '-CAfile',
      caFile,
    ])
    t.match(
      noSni.stdout,
      /no peer certificate available[\s\S]*Cipher is \(NONE\)/,
      'no SNI: no certificate, no session',
    )
    t.equal(upstream.received.length, before + 1)
    // The TLS port knows only the SNI (localhost): a Host naming the http system's port must
    // not make the tunnel that system's, in plain text upstream.
    const plainPort = new URL(bench.upstream.origin).port
    const plainBefore = bench.upstream.received.length
    const plain = await curlTransparent(
      `localhost:${plainPort}:127.0.0.1:${tlsPort}`,
      caFile,
      `https://localhost:${plainPort}/v1/checks`,
      '{"amount":7}',
    )
    t.equal(status(plain), 403, 'no https system there: not enrolled')
    t.equal(bench.upstream.received.length, plainBefore, 'nothing went out in plain text')
  })

  t.test(
    'rotation: an agent that trusts the old and the new CA keeps working across the switch',
    async (t) => {
      // The proxy signs with `ca` (the new CA); agents rolled earlier trust a bundle of both.
      const old = await createInterceptionCa({ hosts: ['localhost'], days: 1, name: 'old interception CA' })
      const both = join(dir, 'both.pem')
      writeFileSync(both, `${old.certPem}${ca.certPem}`)
      const onlyOld = join(dir, 'old.pem')
      writeFileSync(onlyOld, old.certPem)
      const through = (caBundle: string) =>
        run('curl', [
          '-s',
          '-o',
          '/dev/null',
          '-w',
          '%{http_code}',
          '--noproxy',
          '',
          '-x',
          proxyUrl,
          '--cacert',
          caBundle,
          '-X',
          'POST',
          '-d',
          '{}',
          url('/v1/checks'),
        ])
      t.equal((await through(both)).stdout, '200', 'the overlap bundle trusts the new CA')
      const stale = await through(onlyOld)
      t.not(
        stale.code,
        0,
        'an agent that trusts only the old CA is refused once the proxy signs with the new one',
      )
    },
  )

  t.test(
    'a client that sends Connection: close gets its answer and the connection closed after it',
    async (t) => {
      // A second request sent once the first is answered tells, with no clock: a connection held
      // open after a `Connection: close` answers it too (http-proxy once filled the stripped
      // header with keep-alive, holding the socket); a closed one answers only the first.
      const script = `
      const http = require('node:http'), tls = require('node:tls')
      const [proxyPort, port] = process.argv.slice(1)
      http.request({ host: '127.0.0.1', port: proxyPort, method: 'CONNECT', path: 'localhost:' + port }).on('connect', (res, socket) => {
        const req = (close) => 'POST /v1/checks HTTP/1.1\\r\\nHost: localhost:' + port + '\\r\\ncontent-length: 2\\r\\n' + (close ? 'connection: close\\r\\n' : '') + '\\r\\n{}'
        const s = tls.connect({ socket, servername: 'localhost' }, () => s.write(req(true)))
        let text = '', again = false
        const report = (ended) => {
          const ok = text.split('HTTP/1.1 200 ').length - 1
          const close = /\\r\\nconnection: close\\r\\n/i.test(text)
          console.log(JSON.stringify({ status: text.split('\\r\\n')[0], ok, close, ended }))
          process.exit(0)
        }
        s.on('data', (d) => {
          text += d
          // The whole first answer is in: ask again on the same connection.
          if (!again && /\\r\\n\\r\\n[\\s\\S]*\\}/.test(text)) { again = true; s.write(req(false), () => {}) }
        })
        s.on('error', () => {})
        s.on('close', () => report(true))
        // Only a bound on the test, not a measure: an unended connection reports so.
        setTimeout(() => report(false), 15000)
      }).end()`
      const r = await run(process.execPath, ['-e', script, String(bench.port), String(upstream.port)], {
        NODE_EXTRA_CA_CERTS: caFile,
      })
      t.same(JSON.parse(r.stdout.trim()), { status: 'HTTP/1.1 200 OK', ok: 1, close: true, ended: true })
    },
  )

  t.test(
    "inside a tunnel a request cannot reach another system: every path is the tunnel host's",
    async (t) => {
      // One tunnel per request, opened for the trusted upstream; what comes back is its first line and body.
      const script = `
      const http = require('node:http'), tls = require('node:tls')
      const [proxyPort, port, request] = process.argv.slice(1)
      http.request({ host: '127.0.0.1', port: proxyPort, method: 'CONNECT', path: 'localhost:' + port }).on('connect', (res, socket) => {
        const s = tls.connect({ socket, servername: 'localhost' }, () => s.write(request.replaceAll('|', '\\r\\n')))
        let text = ''
        s.on('data', (d) => (text += d))
        s.on('end', () => { const [head, body] = text.split('\\r\\n\\r\\n'); console.log(head.split('\\r\\n')[0] + ' ' + body); process.exit(0) })
        s.on('error', (e) => { console.log('error ' + e.message); process.exit(0) })
      }).end()`
      const inTunnel = async (request: string) =>
        (
          await run(process.execPath, ['-e', script, String(bench.port), String(upstream.port), request], {
            NODE_EXTRA_CA_CERTS: caFile,
          })
        ).stdout.trim()
      const host = `Host: localhost:${upstream.port}|connection: close|content-length: 2||{}`
      const before = [upstream.received.length, untrusted.received.length]
      // Reverse mode's `/<systemId>/…` is the upstream's own path here: no route of sys_billing.
      t.match(
        await inTunnel(`POST /sys_untrusted/v1/checks HTTP/1.1|${host}`),
        /^HTTP\/1\.1 403 .*"unmapped_route"/,
      )
      t.match(
        await inTunnel(`POST https://localhost:${untrusted.port}/v1/checks HTTP/1.1|${host}`),
        /^HTTP\/1\.1 421 .*"misdirected_request"/,
        'an absolute URI naming another host',
      )
      t.match(
        await inTunnel(`POST http://localhost:${upstream.port}/v1/checks HTTP/1.1|${host}`),
        /^HTTP\/1\.1 421 /,
        'or another scheme',
      )
      t.match(
        await inTunnel(`CONNECT localhost:${untrusted.port} HTTP/1.1|Host: localhost:${untrusted.port}||`),
        /^HTTP\/1\.1 403 .*"tunnel_refused"/,
        'no tunnel inside the tunnel',
      )
      t.match(
        await inTunnel(`POST https://localhost:${upstream.port}/v1/checks HTTP/1.1|${host}`),
        /^HTTP\/1\.1 200 /,
        "an absolute URI naming the tunnel's own host is served",
      )
      t.same(
        [upstream.received.length, untrusted.received.length],
        [before[0]! + 1, before[1]],
        'only that one went out',
      )
    },
  )

  t.test(
    'a STEP_UP write intercepted from HTTPS is approved and replayed to the HTTPS upstream',
    async (t) => {
      const r = await curl('/v1/refunds', [], upstream, '{"charge":"ch_tls"}')
      const actionId = JSON.parse(r.stdout.trim().split('\n')[0] as string).actionId as string
      const approved = await bench.approve(actionId)
      t.same([approved.status, approved.body.type], [200, 'executed'], JSON.stringify(approved.body))
      t.equal(
        upstream.received.at(-1)?.body,
        '{"charge":"ch_tls"}',
        'verified against the system caBundle by the control plane too',
      )
    },
  )

  t.test(
    'refused cleanly: an untrusting client, a Host that is not the tunnel host, a stalled handshake, an unenrolled host, an untrusted upstream',
    async (t) => {
      const before = upstream.received.length
      const untrusting = await run('curl', [
        '-s',
        '--noproxy',
        '',
        '-x',
        proxyUrl,
        '--cacert',
        join(dir, 'nothing.pem'),
        '-X',
        'POST',
        '-d',
        '{}',
        url('/v1/checks'),
      ])
      t.not(untrusting.code, 0, 'curl refuses the minted certificate without the CA')
      const misdirected = await curl('/v1/checks', ['-H', 'Host: billing.example.com'])
      t.equal(status(misdirected), 421)
      t.match(misdirected.stdout, /misdirected_request/)

      // On a proxy of its own with a short handshake limit (here only a lower bound on the wait);
      // the shared bench's limit is long, for clients on a loaded machine.
      const strict = await startBillingProxy(t, {
        systems: () => ({
          passthrough: [],
          systems: [billing],
        }),
        verbs: ['repo.delete'],
        proxy: {
          tls: { caCertFile: caFile, caKeyFile: join(dir, 'ca.key'), handshakeTimeoutMs: 500, port: 0 },
        },
      })
      const stalled = connect(strict.port, '127.0.0.1')
      stalled.on('error', () => {})
      stalled.write(`CONNECT localhost:${upstream.port} HTTP/1.1\r\nHost: localhost:${upstream.port}\r\n\r\n`)
      let seen = ''
      stalled.on('data', (d) => (seen += d))
      const closed = await closesWithin(stalled, 30_000)
      t.ok(closed, `a client that never completes its handshake is cut (${JSON.stringify(seen)})`)
      t.match(
        await strict.cp.metrics.registry.metrics(),
        /writegate_tls_refused_total\{[^}]*reason="handshake_timeout"[^}]*\} 1\b/,
        'as a handshake timeout',
      )
      // The same on the TLS port (transparent mode), where no CONNECT comes first: a connection
      // that sends nothing is cut at the limit too (test/hostile/tls-port.test.ts relies on this).
      const silent = connect(strict.proxy.tlsPort as number, '127.0.0.1')
      silent.on('error', () => {})
      const silentClosed = await closesWithin(silent, 30_000)
      t.ok(silentClosed, 'a client on the TLS port that never sends its ClientHello is cut')
      t.match(
        await strict.cp.metrics.registry.metrics(),
        /writegate_tls_refused_total\{[^}]*reason="handshake_timeout"[^}]*\} 2\b/,
        'also as a handshake timeout',
      )
      // A ClientHello for an intercepted host, then nothing: the TLS server's own limit cuts it.
      const halfway = connect(strict.proxy.tlsPort as number, '127.0.0.1')
      halfway.on('error', () => {})
      halfway.on('data', () => {})
      halfway.write(await tlsClientHello())
      const halfwayClosed = await closesWithin(halfway, 30_000)
      t.ok(halfwayClosed, 'a client that stops after its ClientHello is cut')
      t.match(
        await strict.cp.metrics.registry.metrics(),
        /writegate_tls_refused_total\{[^}]*reason="handshake_timeout"[^}]*\} 3\b/,
        'as a handshake timeout too',
      )

      // Bytes that are no TLS after the CONNECT: the handshake fails, the connection is closed.
      const garbage = connect(bench.port, '127.0.0.1')
      garbage.on('error', () => {})
      let garbageSeen = ''
      garbage.on('data', (d) => (garbageSeen += d))
      garbage.write(`CONNECT localhost:${upstream.port} HTTP/1.1\r\nHost: localhost:${upstream.port}\r\n\r\n`)
      // Inside the tunnel: once the CONNECT is answered (its 200 is all the proxy sends first).
      await waitFor(() => garbageSeen.includes('\r\n\r\n'), 15_000, 'the CONNECT answer')
      garbage.write('GET / HTTP/1.1\r\nHost: localhost\r\n\r\n\x00\xff garbage')
      const garbageClosed = await closesWithin(garbage, 15_000)
      t.ok(
        garbageClosed,
        `plain HTTP inside the tunnel fails the handshake and is closed (${JSON.stringify(garbageSeen.slice(0, 40))})`,
      )

      // TLS 1.2 renegotiation, asked for by the client: refused, and the proxy goes on. Through
      // a CONNECT, and on the TLS port (found in review: its server took OpenSSL's defaults, and
      // the minted context's refusal did not carry over to a connection it was switched to).
      const renegotiates = (open: string, proxyPort: number) =>
        run(
          process.execPath,
          [
            '-e',
            `
      const http = require('node:http'), tls = require('node:tls')
      const [proxyPort, port] = process.argv.slice(1)
      const withTls = (s) => {
        let answered = false
        s.on('data', () => { answered = true })
        s.on('error', () => { console.log(answered ? 'answered' : 'refused'); process.exit(0) })
        s.on('close', () => { console.log(answered ? 'answered' : 'closed'); process.exit(0) })
        setTimeout(() => { console.log(answered ? 'answered' : 'open'); process.exit(0) }, 15000)
      }
      const renegotiate = function () {
        this.renegotiate({}, () => {
          this.write('POST /v1/checks HTTP/1.1\\r\\nHost: localhost:' + port + '\\r\\ncontent-length: 2\\r\\n\\r\\n{}')
        })
      }
      ${open}`,
            String(proxyPort),
            String(upstream.port),
          ],
          { NODE_EXTRA_CA_CERTS: caFile },
        )
      const viaConnect = await renegotiates(
        `http.request({ host: '127.0.0.1', port: proxyPort, method: 'CONNECT', path: 'localhost:' + port })
        .on('connect', (res, socket) => withTls(tls.connect({ socket, servername: 'localhost', maxVersion: 'TLSv1.2' }, renegotiate)))
        .end()`,
        bench.port,
      )
      t.match(
        viaConnect.stdout.trim(),
        /^(closed|refused)$/,
        'a connection that renegotiates is cut, unanswered',
      )
      const onTlsPort = await renegotiates(
        `withTls(tls.connect({ host: '127.0.0.1', port: proxyPort, servername: 'localhost', maxVersion: 'TLSv1.2' }, renegotiate))`,
        strict.proxy.tlsPort as number,
      )
      t.match(onTlsPort.stdout.trim(), /^(closed|refused)$/, 'on the TLS port too, cut, unanswered')

      const unenrolled = await run('curl', [
        '-s',
        '-o',
        '/dev/null',
        '-w',
        '%{http_connect}',
        '--noproxy',
        '',
        '-x',
        proxyUrl,
        '--cacert',
        caFile,
        'https://example.invalid/',
      ])
      t.equal(unenrolled.stdout, '403', 'CONNECT to a host of no system: tunnel_refused')

      const bad = await curl('/v1/checks', [], untrusted)
      t.equal(status(bad), 502, 'an upstream certificate the system does not trust: not sent')
      t.match(bad.stdout, /"code":"upstream_certificate_invalid"/)
      t.match(bad.stdout, /"certificateError":"[A-Z_]+"/)
      t.match(bad.stdout, /"receiptId":"rcp_/)
      t.equal(untrusted.received.length, 0)
      t.equal(upstream.received.length, before)

      const metrics = await bench.cp.metrics.registry.metrics()
      t.match(metrics, /writegate_tls_refused_total\{[^}]*reason="host_mismatch"/)
      const health = await fetch(`http://127.0.0.1:${bench.port}/healthz`)
      t.equal(health.status, 200, 'the proxy still serves')
    },
  )
})

t.test('transparent mode: an SNI on the pass-through list is tunnelled opaque, others closed', async (t) => {
  // The pass-through target: an https server whose own CA is all the client trusts, so a
  // completed request proves the proxy did not terminate the connection.
  const outside = await startHttpsUpstream(t)
  const dir = mkdtempSync(join(tmpdir(), 'wg-tls-pass-'))
  const ca = await createInterceptionCa({ hosts: ['localhost'], days: 1 })
  writeFileSync(join(dir, 'ca.crt'), ca.certPem)
  writeFileSync(join(dir, 'ca.key'), ca.keyPem, { mode: 0o600 })
  writeFileSync(join(dir, 'outside.crt'), outside.caPem)
  // The billing systems' upstream is plain http on 127.0.0.1: no https system on localhost.
  const bench = await startBillingProxy(t, {
    proxy: {
      passthrough: ['localhost'],
      tls: {
        caCertFile: join(dir, 'ca.crt'),
        caKeyFile: join(dir, 'ca.key'),
        port: 0,
        passthroughPort: outside.port,
      },
    },
  })
  const tlsPort = bench.proxy.tlsPort as number
  const through = (name: string, cacert: string) =>
    curlTransparent(`${name}:443:127.0.0.1:${tlsPort}`, cacert, `https://${name}/anything`, '{}')
  const passed = await through('localhost', join(dir, 'outside.crt'))
  t.equal(passed.stdout.trim().split('\n').at(-1), '200', passed.stderr)
  t.same(
    outside.received.map((r) => [r.method, r.url]),
    [['POST', '/anything']],
    'it reached the host, ungated and unchanged',
  )
  t.notOk(outside.received[0]?.headers['x-writegate-receipt'], 'no decision was made for it')
  const receipts = await bench.cp.database!.sql<{ n: number }[]>`select count(*)::int as n from receipts
    where tenant_id = ${bench.tenant.tenantId} and kind = 'CHECK'`
  t.equal(receipts[0]?.n, 0)
  const intercepted = await through('localhost', join(dir, 'ca.crt'))
  t.not(intercepted.code, 0, 'the interception CA is not what answered')

  const other = await through('example.invalid', join(dir, 'outside.crt'))
  t.not(other.code, 0, 'an SNI neither enrolled nor on the list: closed')
  const noSni = await run('openssl', ['s_client', '-connect', `127.0.0.1:${tlsPort}`, '-noservername'])
  t.match(noSni.stdout, /no peer certificate available/, 'no SNI: closed before any certificate')
  t.equal(outside.received.length, 1, 'neither reached the host')
  const metrics = await bench.cp.metrics.registry.metrics()
  t.match(metrics, /writegate_tls_passed_through_total(\{[^}]*\})? 2\b/)
  t.match(metrics, /writegate_tls_refused_total\{[^}]*reason="no_sni"/)
  t.match(metrics, /writegate_tls_refused_total\{[^}]*reason="sni_not_enrolled"/)
})

t.test('transparent pass-through, hostile: a host that refuses, a client that resets mid-dial', async (t) => {
  const unhandled = watchUnhandled(t)
  const dir = mkdtempSync(join(tmpdir(), 'wg-tls-pass-bad-'))
  const ca = await createInterceptionCa({ hosts: ['localhost'], days: 1 })
  writeFileSync(join(dir, 'ca.crt'), ca.certPem)
  writeFileSync(join(dir, 'ca.key'), ca.keyPem, { mode: 0o600 })
  // A port nothing listens on: every pass-through dial is refused.
  const closedPort = await new Promise<number>((resolve) => {
    const s = createNetServer().listen(0, '127.0.0.1', () => {
      const p = (s.address() as AddressInfo).port
      s.close(() => resolve(p))
    })
  })
  const bench = await startBillingProxy(t, {
    proxy: {
      passthrough: ['localhost'],
      tls: {
        caCertFile: join(dir, 'ca.crt'),
        caKeyFile: join(dir, 'ca.key'),
        port: 0,
        passthroughPort: closedPort,
      },
    },
  })
  const tlsPort = bench.proxy.tlsPort as number
  const hello = await tlsClientHello()
  const closedAfter = async (send: (s: Socket) => void) => {
    const s = connect(tlsPort, '127.0.0.1')
    s.on('error', () => {})
    await new Promise((r) => s.once('connect', r))
    send(s)
    await new Promise<void>((r) => (s.destroyed ? r() : s.once('close', () => r())))
  }
  await closedAfter((s) => s.write(hello))
  t.pass('a refused dial closes the agent connection')
  for (let i = 0; i < 20; i++)
    await closedAfter((s) => {
      s.write(hello)
      s.resetAndDestroy()
    })
  t.match(
    await bench.cp.metrics.registry.metrics(),
    /writegate_tls_refused_total\{[^}]*reason="passthrough_unreachable"[^}]*\} [1-9]/,
    'a dial that failed is counted',
  )
  // A CONNECT to a listed host that cannot be reached is answered (found in review: it got no
  // answer, uncounted).
  const forward = await startBillingProxy(t, { proxy: { passthrough: [`localhost:${closedPort}`] } })
  const viaConnect = connect(forward.port, '127.0.0.1')
  viaConnect.on('error', () => {})
  viaConnect.write(`CONNECT localhost:${closedPort} HTTP/1.1\r\nHost: localhost:${closedPort}\r\n\r\n`)
  // A hang is what this catches: bounded, so the test fails instead of timing out.
  const answer = await Promise.race([
    once(viaConnect, 'data').then(([d]) => (d as Buffer).toString('latin1')),
    once(viaConnect, 'close').then(() => 'closed, unanswered'),
    new Promise<string>((r) => setTimeout(() => r('no answer'), 15_000).unref()),
  ])
  viaConnect.destroy()
  t.match(answer, /^HTTP\/1\.1 502[\s\S]*"code":"upstream_error"/, 'CONNECT: 502')
  t.match(
    await forward.cp.metrics.registry.metrics(),
    /writegate_tls_refused_total\{[^}]*reason="passthrough_unreachable"[^}]*\} 1\b/,
    'and counted',
  )
  const health = await fetch(`http://127.0.0.1:${bench.port}/healthz`)
  t.equal(health.status, 200, 'the proxy still serves')
  t.same(unhandled.splice(0), [], 'nothing unhandled')
})

t.test('a handshake the TLS port refuses is counted once, under its reason (found in review)', async (t) => {
  // The CA may vouch for example.com only: the enrolled localhost is outside it.
  const { upstream, bench, tlsPort } = await startInterceptingProxy(t, { caHosts: ['example.com'] })
  const refused = await run(process.execPath, [
    '-e',
    `
      const tls = require('node:tls')
      const s = tls.connect({ host: '127.0.0.1', port: process.argv[1], servername: 'localhost', rejectUnauthorized: false })
      s.on('secureConnect', () => { console.log('connected'); process.exit(0) })
      s.on('error', () => { console.log('refused'); process.exit(0) })
      s.on('close', () => { console.log('closed'); process.exit(0) })`,
    String(tlsPort),
  ])
  t.match(refused.stdout.trim(), /^(refused|closed)$/, 'no certificate outside the CA')
  const metrics = await bench.cp.metrics.registry.metrics()
  const counted = [...metrics.matchAll(/writegate_tls_refused_total\{[^}]*reason="([a-z_]+)"[^}]*\} (\d+)/g)]
    .filter((m) => m[2] !== '0')
    .map((m) => `${m[1]} ${m[2]}`)
  t.same(counted, ['outside_ca 1'], 'one refusal, as outside the CA, and not again as a failed handshake')
  t.equal(upstream.received.length, 0)
})
