import t from 'tap'
import type { Barred } from '../../src/core/evaluate.js'
import { BarredBeforeBodyEnd, holdBodyEnd } from '../../src/proxy/late-body.js'
import { throughHttpProxy } from '../helpers/through-http-proxy.js'
import { waitFor } from '../helpers/wait.js'

// holdBodyEnd replaces the request's pipe, which http-proxy uses to send a body upstream: if it
// ever took the body another way, the hold would be skipped and the first case here would fail.
t.test('a late body goes upstream whole only while the key stands', async (t) => {
  const received: { complete: boolean; body: Buffer }[] = []
  let standing: () => Promise<Barred | null> = async () => null
  let standingReads = 0
  const failures: unknown[] = []
  const url = await throughHttpProxy(
    t,
    (req, res) => {
      const chunks: Buffer[] = []
      req.on('data', (c: Buffer) => chunks.push(c))
      req.on('end', () => {
        received.push({ complete: true, body: Buffer.concat(chunks) })
        res.end('ok')
      })
      req.on('aborted', () => received.push({ complete: false, body: Buffer.concat(chunks) }))
    },
    (req, res, proxy) => {
      holdBodyEnd(req, () => {
        standingReads++
        return standing()
      })
      proxy.web(req, res, (err) => {
        failures.push(err)
        res.statusCode = err instanceof BarredBeforeBodyEnd ? 403 : 502
        res.end()
      })
    },
  )
  const arrived = (n: number) => waitFor(() => received.length >= n, 15_000, `${n} requests at the upstream`)

  // Larger than every buffer on the way, so backpressure pauses and resumes the request.
  const large = Buffer.from(Array.from({ length: 4_000_000 }, (_, i) => (i * 31) & 0xff))
  for (const body of [Buffer.from('{"amount":42}'), large]) {
    const r = await fetch(url, { method: 'POST', body, signal: AbortSignal.timeout(20_000) })
    t.equal(r.status, 200, `a ${body.length}-byte body goes through`)
    await r.text()
    t.ok(received.at(-1)?.body.equals(body), 'whole, in order')
  }
  t.equal(standingReads, 2, 'standing read once per body, at its end')

  standing = async () => ({ reason: 'sponsor_revoked_key', provenance: 'revocation' })
  const barred = await fetch(url, { method: 'POST', body: large, signal: AbortSignal.timeout(20_000) })
  t.equal(barred.status, 403, 'barred at the end: refused')
  await arrived(3)
  t.same(
    received.slice(2).map((r) => r.complete),
    [false],
    'the upstream saw a request that never ended',
  )
  t.ok((received.at(-1)?.body.length ?? 0) < large.length, 'short of its last bytes')
  t.match(failures.at(-1), { barred: { reason: 'sponsor_revoked_key' } })

  standing = () => Promise.reject(new Error('Redis away'))
  const unreadable = await fetch(url, { method: 'POST', body: large, signal: AbortSignal.timeout(20_000) })
  t.equal(unreadable.status, 403, 'standing unreadable: refused too (fail closed)')
  t.match(failures.at(-1), { barred: null })
  await arrived(4)
  t.equal(received.at(-1)?.complete, false)
})
