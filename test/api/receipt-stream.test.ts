import { request } from 'node:http'
import { connect } from 'node:net'
import t from 'tap'
import { createReceiptWakeups } from '../../src/audit/receipt-wakeups.js'
import { createStreamSlots, MAX_STREAMS_PER_TENANT } from '../../src/audit/stream-slots.js'
import { nowSeconds } from '../../src/core/clock.js'
import { newId } from '../../src/core/ids.js'
import { draft } from '../../src/core/receipt.js'
import { createLogger } from '../../src/observability/logger.js'
import { listenForReceipts } from '../../src/store/postgres/receipt-notifications.js'
import { createReceiptReader } from '../../src/store/postgres/receipt-reader.js'
import { createSystemOfRecord } from '../../src/store/postgres/system-of-record.js'
import { ed25519 } from '../helpers/audit-logs.js'
import { API_BACKENDS, openTestDatabase } from '../helpers/backends.js'
import { startControlPlane, type TestControlPlane } from '../helpers/control-plane.js'
import { openStream, waitFor } from '../helpers/sse.js'

function appendChecks(tcp: TestControlPlane, tenantId: string, n: number) {
  const at = nowSeconds(tcp.clock)
  return tcp.cp.auditTrail.log.append(
    Array.from({ length: n }, () =>
      draft({ receiptId: newId('receipt'), tenantId, kind: 'CHECK', decision: 'ALLOW', createdAt: at }),
    ),
  )
}

/** Reads the raw event stream until `until` matches the text so far, then disconnects. */
function readRaw(base: string, apiKey: string, path: string, until: RegExp): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request(new URL(path, base), { headers: { authorization: `Bearer ${apiKey}` } }, (res) => {
      let text = `HTTP ${res.statusCode} ${res.headers['content-type']}\n`
      res.setEncoding('utf8')
      res.on('data', (chunk: string) => {
        text += chunk
        if (until.test(text)) {
          req.destroy()
          resolve(text)
        }
      })
      res.on('error', () => {})
    })
    req.on('error', (err) => {
      if (!req.destroyed) reject(err)
    })
    req.setTimeout(20_000, () => {
      req.destroy()
      reject(new Error(`no ${until} in the stream`))
    })
    req.end()
  })
}

for (const kind of API_BACKENDS) {
  t.test(`receipt stream over a real socket: ${kind}`, async (t) => {
    const tcp = await startControlPlane(t, kind, { settings: { audit: { streamKeepaliveSeconds: 1 } } })
    const { api, cp } = tcp
    const base = await cp.app.listen({ port: 0, host: '127.0.0.1' })
    const a = await api.newTenant()
    const b = await api.newTenant()
    await appendChecks(tcp, a.tenantId, 5)
    const headOf = async () =>
      (await api.get('/v1/receipts/verify', { bearer: a.apiKey })).body.headSeq as number

    t.test('replays after `since`, then delivers live receipts, in order', async (t) => {
      const head = await headOf()
      const c = openStream(base, a.apiKey, { since: 2 })
      t.teardown(() => c.close())
      await waitFor(() => c.received.length === head - 2, 15_000, 'the replay')
      await appendChecks(tcp, a.tenantId, 3)
      await appendChecks(tcp, b.tenantId, 2)
      await api.post('/v1/principals', { name: `live-${Date.now()}` }, { bearer: a.apiKey })
      await waitFor(() => c.received.length === head - 2 + 4, 15_000, 'the live receipts')
      t.same(
        c.received.map((r) => r.seq),
        Array.from({ length: head + 2 }, (_, i) => i + 3),
      )
      t.ok(
        c.received.every((r) => r.id === r.seq && r.receipt.tenantId === a.tenantId),
        'id is the seq; only own receipts',
      )
      t.equal(c.received.at(-1)?.receipt.kind, 'PRINCIPAL_CREATE', 'an HTTP admin change arrives too')
    })

    t.test('Last-Event-ID resumes the stream and wins over since', async (t) => {
      const head = await headOf()
      const c = openStream(base, a.apiKey, { since: 1, lastEventId: head - 2 })
      t.teardown(() => c.close())
      await waitFor(() => c.received.length === 2, 15_000, 'the resumed stream')
      await new Promise((r) => setTimeout(r, 300))
      t.same(
        c.received.map((r) => r.seq),
        [head - 1, head],
      )
    })

    t.test('wire format: id, event and data lines; keepalive comments', async (t) => {
      const text = await readRaw(base, a.apiKey, '/v1/receipts/stream?since=0', /: keepalive\n\n/)
      t.match(text, /^HTTP 200 text\/event-stream/)
      t.match(text, /\nid: 1\nevent: receipt\ndata: \{[^\n]*"seq":1[,}][^\n]*\n\n/)
      t.match(text, /: keepalive\n\n$/)
    })

    t.test('a client that goes away releases its subscription and timer', async (t) => {
      const wakeups = cp.auditTrail.services.wakeups
      await waitFor(() => wakeups.subscriberCount() === 0, 5000, 'earlier clients to be gone')
      const clients = [openStream(base, a.apiKey), openStream(base, b.apiKey)]
      await Promise.all(clients.map((c) => c.opened))
      await waitFor(() => wakeups.subscriberCount() === 2, 5000, 'two subscriptions')
      for (const c of clients) c.close()
      await waitFor(() => wakeups.subscriberCount() === 0, 5000, 'subscriptions released')
      t.pass('released')
    })
  })
}

t.test(
  'a tenant holds at most 16 open streams per process; another tenant is not held up (found in review)',
  async (t) => {
    const tcp = await startControlPlane(t, 'fake')
    const base = await tcp.cp.app.listen({ port: 0, host: '127.0.0.1' })
    const [a, b] = [await tcp.api.newTenant(), await tcp.api.newTenant()]
    const open = Array.from({ length: MAX_STREAMS_PER_TENANT }, () => openStream(base, a.apiKey))
    t.teardown(() => {
      for (const c of open) c.close()
    })
    await Promise.all(open.map((c) => c.opened))
    const wakeups = tcp.cp.auditTrail.services.wakeups
    await waitFor(() => wakeups.subscriberCount() === MAX_STREAMS_PER_TENANT, 10_000, 'every stream open')
    // Over the socket, bounded: a stream that opened instead would never end.
    const refused = await fetch(new URL('/v1/receipts/stream', base), {
      headers: { authorization: `Bearer ${a.apiKey}` },
      signal: AbortSignal.timeout(10_000),
    })
    t.same(
      [refused.status, await refused.json()],
      [
        429,
        {
          error: 'too many open receipt streams',
          code: 'stream_limit_reached',
          limit: MAX_STREAMS_PER_TENANT,
        },
      ],
    )
    t.equal(wakeups.subscriberCount(), MAX_STREAMS_PER_TENANT, 'the refused one opened nothing')
    const other = openStream(base, b.apiKey)
    open.push(other)
    await other.opened
    t.pass("another tenant's stream opens")
    // One closed, one more may open.
    open[0]?.close()
    await waitFor(() => wakeups.subscriberCount() === MAX_STREAMS_PER_TENANT, 10_000, 'one stream gone')
    const again = openStream(base, a.apiKey)
    open.push(again)
    await again.opened
    t.pass('a stream opens again once one is closed')
  },
)

t.test('a client gone before its stream opened holds no slot (found in review)', async (t) => {
  const tcp = await startControlPlane(t, 'pglite-memory')
  const base = new URL(await tcp.cp.app.listen({ port: 0, host: '127.0.0.1' }))
  const a = await tcp.api.newTenant()
  const slots = tcp.cp.auditTrail.services.streamSlots
  // Each request sent, and its connection cut while the key is checked (0 to 9 ms later).
  await Promise.all(
    Array.from(
      { length: 20 },
      (_, i) =>
        new Promise<void>((resolve) => {
          const s = connect(Number(base.port), base.hostname, () => {
            s.write(
              `GET /v1/receipts/stream HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${a.apiKey}\r\n\r\n`,
            )
            setTimeout(() => s.destroy(), i % 10)
          })
          s.on('error', () => {})
          s.on('close', () => resolve())
        }),
    ),
  )
  await waitFor(
    () => slots.held(a.tenantId) === 0,
    10_000,
    () => `${slots.held(a.tenantId)} slots held`,
  )
  await waitFor(
    () => tcp.cp.auditTrail.services.wakeups.subscriberCount() === 0,
    10_000,
    'no subscription left',
  )
  const again = openStream(base.href, a.apiKey)
  t.teardown(() => again.close())
  await again.opened
  t.pass('the tenant can still open a stream')
})

t.test('slots are per tenant and per process', async (t) => {
  const slots = createStreamSlots({ perTenant: 2, total: 3 })
  const a1 = slots.take('ten_a')
  const a2 = slots.take('ten_a')
  t.same(slots.take('ten_a'), { limit: 2 }, "a tenant's limit")
  const b1 = slots.take('ten_b')
  t.same(slots.take('ten_c'), { limit: 3 }, "the process's limit")
  for (const s of [a1, a2, b1]) if ('release' in s) s.release()
  if ('release' in a1) a1.release()
  t.equal(slots.held(), 0, 'released once each')
  t.ok('release' in slots.take('ten_c'))
})

t.test('closing the control plane ends open streams', async (t) => {
  const tcp = await startControlPlane(t, 'fake')
  const base = await tcp.cp.app.listen({ port: 0, host: '127.0.0.1' })
  const a = await tcp.api.newTenant()
  const c = openStream(base, a.apiKey)
  t.teardown(() => c.close())
  await c.opened
  await waitFor(() => c.received.length > 0)
  await tcp.cp.app.close()
  t.equal(tcp.cp.auditTrail.services.wakeups.subscriberCount(), 0)
})

t.test('two control planes on one Postgres: a stream on one sees writes through both', async (t) => {
  const db = await openTestDatabase('postgres')
  t.teardown(() => db.close())
  const key = ed25519().privateKey
  const one = await startControlPlane(t, 'postgres', { db, auditSigningKey: key })
  const two = await startControlPlane(t, 'postgres', { db, auditSigningKey: key })
  const base = await one.cp.app.listen({ port: 0, host: '127.0.0.1' })
  const a = await two.api.newTenant()
  const c = openStream(base, a.apiKey)
  t.teardown(() => c.close())
  await c.opened
  const writes: Promise<unknown>[] = []
  for (let i = 0; i < 20; i++) {
    writes.push(appendChecks(i % 2 ? one : two, a.tenantId, 1 + (i % 3)))
    if (i % 5 === 0) writes.push(two.api.post('/v1/principals', { name: `p${i}` }, { bearer: a.apiKey }))
  }
  await Promise.all(writes)
  const head = (await one.api.get('/v1/receipts/verify', { bearer: a.apiKey })).body
  t.equal(head.valid, true, 'one chain, written by two processes')
  await waitFor(() => c.received.length >= head.headSeq, 15_000, 'every receipt')
  t.same(
    c.received.map((r) => r.seq),
    Array.from({ length: head.headSeq }, (_, i) => i + 1),
    'no gaps, no duplicates',
  )
})

t.test('Postgres NOTIFY wakes streams only after a commit', async (t) => {
  const db = await openTestDatabase('postgres')
  t.teardown(() => db.close())
  const sor = createSystemOfRecord(db.db)
  // Polling disabled (an hour), so only the notification can wake the subscriber.
  const wakeups = createReceiptWakeups({
    reader: createReceiptReader(db.db.sql),
    pollMs: 3_600_000,
    logger: createLogger('silent'),
    listen: listenForReceipts(db.db.sql),
  })
  t.teardown(() => wakeups.close())
  const woken: (number | null)[] = []
  let listening = () => {}
  const ready = new Promise<void>((r) => {
    listening = r
  })
  wakeups.subscribe('ten_n', (head) => {
    woken.push(head)
    listening()
  })
  await ready // the listener wakes everyone once it is connected
  woken.length = 0
  const d = () => draft({ receiptId: newId('receipt'), tenantId: 'ten_n', kind: 'GRANT', createdAt: 1 })
  await t.rejects(
    sor.transaction(async (s) => {
      await s.receipts.append([d()])
      throw new Error('rolled back on purpose')
    }),
  )
  await sor.transaction((s) => s.receipts.append([d()]))
  await waitFor(() => woken.length > 0, 10_000, 'a notification')
  await new Promise((r) => setTimeout(r, 200))
  t.same(woken, [null], 'one wake-up, for the committed transaction only')
})

for (const how of ['revoked', 'on the roster'] as const)
  t.test(`a stream ends once its key is ${how}: it does not outlive its credential`, async (t) => {
    const tcp = await startControlPlane(t, 'fake', {
      settings: { audit: { streamKeepaliveSeconds: 1 } },
    })
    const base = await tcp.cp.app.listen({ port: 0, host: '127.0.0.1' })
    const o = await tcp.api.newTenant()
    const second = await tcp.api.post('/v1/keys', { email: o.email }, { bearer: o.apiKey })
    let text = ''
    const ended = new Promise<string>((resolve, reject) => {
      const req = request(
        new URL('/v1/receipts/stream?since=0', base),
        { headers: { authorization: `Bearer ${second.body.apiKey}` } },
        (res) => {
          res.setEncoding('utf8')
          res.on('data', (c: string) => {
            text += c
          })
          res.on('end', () => resolve(text))
          res.on('error', reject)
        },
      )
      req.setTimeout(30_000, () => {
        req.destroy()
        reject(new Error('the stream was not ended after the revoke'))
      })
      req.end()
    })
    // Revoked once the stream has started (its first bytes), not after a fixed delay.
    await waitFor(() => text.includes('retry: 1000'), 15_000, 'the stream to start')
    if (how === 'revoked')
      await tcp.api.post(`/v1/principals/${second.body.principalId}/revoke`, {}, { bearer: o.apiKey })
    else await tcp.api.post('/v1/revoke', { keyId: second.body.keyId }, { bearer: o.sponsorToken })
    await ended
    t.match(text, /retry: 1000/, 'the stream had started')
    t.pass('the server ended the stream')
  })

t.test('a revoked key is delivered no receipt written after its revocation', async (t) => {
  // Keepalives far apart: the stream must not wait for one to notice the revocation.
  const tcp = await startControlPlane(t, 'fake', {
    settings: { audit: { streamKeepaliveSeconds: 15 } },
  })
  const base = await tcp.cp.app.listen({ port: 0, host: '127.0.0.1' })
  const o = await tcp.api.newTenant()
  const second = await tcp.api.post('/v1/keys', { email: o.email }, { bearer: o.apiKey })
  let text = ''
  const ended = new Promise<void>((resolve, reject) => {
    const req = request(
      new URL('/v1/receipts/stream?since=0', base),
      { headers: { authorization: `Bearer ${second.body.apiKey}` } },
      (res) => {
        res.setEncoding('utf8')
        res.on('data', (c: string) => {
          text += c
        })
        res.on('end', () => resolve())
        res.on('error', reject)
      },
    )
    req.on('error', reject)
    req.end()
  })
  await tcp.api.post('/v1/check', { verb: 'verify', target: 'before-revoke' }, { bearer: o.apiKey })
  await waitFor(() => text.includes('before-revoke'), 15_000, 'the receipt written before the revocation')
  t.match(text, /before-revoke/, 'delivered while the key lived')
  await tcp.api.post(`/v1/principals/${second.body.principalId}/revoke`, {}, { bearer: o.apiKey })
  await tcp.api.post('/v1/check', { verb: 'verify', target: 'after-revoke' }, { bearer: o.apiKey })
  await ended
  t.notMatch(text, /after-revoke/, 'the stream ended instead of delivering it')
})
